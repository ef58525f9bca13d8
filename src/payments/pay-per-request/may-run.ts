import type { PaymentRow } from '../payment-store.ts';

/**
 * What a credited payment may still pay for: this request, or nothing (a top-up's payment, a payment
 * first sent with another request, or a replay past its window).
 */
export type PaidRequestVerdict = { kind: 'runs' } | { kind: 'topup-payment' } | { kind: 'other-request' } | { kind: 'expired' };

/**
 * `replayed`: this request did not open the payment (a resend, or a request that joined another's
 * settlement). `requestDigest`: this request's (request-digest.ts). `maxTimeoutSeconds` is
 * topup.maxTimeoutSeconds.
 */
export function mayRunPaid(payment: PaymentRow, replayed: boolean, requestDigest: string, maxTimeoutSeconds: number, now = Date.now()): PaidRequestVerdict {
  // A top-up's payment never runs chat requests, whether it is credited already or still settling
  // when the chat joins it: a header that leaked from a top-up (a log, a proxy) would otherwise spend
  // the payer's balance on someone else's inference. (Not by timestamps: a chat that joined the
  // top-up's settlement would pass them.)
  if (payment.purpose !== 'chat') return { kind: 'topup-payment' };
  // A payment runs only the request it was first sent with, whoever sends it again: its signature is
  // public on chain once settled, and a header rebuilt from the calldata must not run an observer's
  // own prompt on the payer's balance. Checked whether or not this request opened the payment: a
  // failed payment reclaimed under another request is still the first request's. A row without a
  // digest (recorded before migration 020) runs nothing more.
  if (payment.request_digest !== requestDigest) return { kind: 'other-request' };
  // A replayed payment credits nothing more, and it may spend the wallet's balance only while its
  // authorization is valid, and at most topup.maxTimeoutSeconds after its credit whatever
  // validBefore the payer signed (a hand-rolled client may sign for days): a payment header that
  // leaks later (a log, a proxy) must not become a lasting credential.
  const replayableUntil = Math.min(Number(payment.valid_before) * 1000, Number(payment.credited_at) + maxTimeoutSeconds * 1000);
  if (replayed && replayableUntil <= now) return { kind: 'expired' };
  return { kind: 'runs' };
}
