import type { ChannelErrorCode } from '../channels/channel-types.ts';
import type { Offer } from '../offers.ts';

/**
 * This request's offer: what every 402 of the workflow carries (the wire format, its extensions
 * and the PAYMENT-REQUIRED header are the web edge's, src/http/x402/).
 */
export interface PaidOffer {
  /** The full URL of the route being paid for (the x402 `resource`). */
  resource: string;
  /** The route's path, for the wire's per-route extensions (bazaar, sign-in-with-x). */
  path: string;
  accepts: Offer[];
  description: string;
  /** Fields every 402 of this request states: its price, its reservation, upto's least charge. */
  fields: Record<string, unknown>;
}

/**
 * What the paid-request workflow decided for one request without an API key. The workflow never
 * writes an answer itself; src/http/x402/paid-outcome.ts maps each kind to a status, headers and a
 * body. A refusal a lower module raises as an ApiError (an undecodable header, a payment that
 * answers no offer, an upto payment still open, a rate limit) passes through as the thrown value it
 * always is (src/refusal.ts): those are the same on every route.
 */
export type PaidOutcome =
  /** The request ran: its answer (or its stream, or the cut of a client past its deadline) is written. */
  | { kind: 'ran' }
  /** A batch-settlement cooperative refund was made (no request ran): its receipt is set. */
  | { kind: 'refunded'; refundedUsdc: number; channelId: string; transaction: string }
  /** Pay (again): the 402 with the offer, `code` saying why, `fields` added to the body. */
  | { kind: 'pay'; offer: PaidOffer; code: PayCode; message: string; fields: Record<string, unknown> }
  /** The request or its payment's identifier is malformed: nothing was offered or settled. */
  | { kind: 'invalid'; message: string }
  /** The facilitator or the chain did not answer: nothing was settled; the same payment, sent again, settles. */
  | { kind: 'facilitator-unavailable'; reason: string }
  /** The payment was sent and is not confirmed yet; the request did not run. */
  | { kind: 'pending'; transaction: string | null }
  /** The sign-in-with-x verifier could not reach the chain: nothing was charged. */
  | { kind: 'siwx-unavailable'; reason: string }
  /** The payment identifier belongs to another request (or one still being paid for); `retryLater` when waiting helps. */
  | { kind: 'identifier-conflict'; message: string; fields: Record<string, unknown>; retryLater: boolean };

/** Answers a 402 for one paid request: its code, what to do, and fields added to the body. */
export type AskForPayment = (code: PayCode, message: string, fields?: Record<string, unknown>) => PaidOutcome;

/**
 * Why a 402 asks again: the codes a stock x402 client (and docs/api.md) knows, and the
 * batch-settlement scheme's own (the stock client recovers from its cumulative-amount mismatch).
 */
export type PayCode =
  | 'PAYMENT_REQUIRED'
  | 'PAYMENT_INSUFFICIENT'
  | 'PAYMENT_REJECTED'
  | 'PAYMENT_EXPIRED'
  | 'INSUFFICIENT_BALANCE'
  | 'KEY_LIMIT_EXCEEDED'
  | 'SIWX_REJECTED'
  | ChannelErrorCode;

/**
 * Ends the workflow with `outcome` from deep inside it (a claim refused inside the settle's
 * admission hook must stop the settle before anything is sent); payPerRequest returns the outcome.
 */
export class PaidRefusal extends Error {
  constructor(readonly outcome: Exclude<PaidOutcome, { kind: 'ran' }>) {
    super(outcome.kind);
  }
}
