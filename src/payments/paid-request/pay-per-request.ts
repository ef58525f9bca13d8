import { getBalance } from '../../ledger/balances.ts';
import { reservationRefusal } from '../../metered/reservation-refusal.ts';
import { mayRunPaid } from '../pay-per-request/may-run.ts';
import { matchPaidPayment, offerRequest } from '../pay-per-request/offer.ts';
import { payPerRequestKey } from '../pay-per-request/wallet-key.ts';
import { decodePaymentHeader } from '../decode.ts';
import { paymentMismatch, type MatchedPayment } from '../match.ts';
import { TOPUP_PAYMENT, type PaymentRow } from '../payment-store.ts';
import { settleMatched } from '../settle-matched.ts';
import { mustNotPayAgain } from '../rejection-message.ts';
import { refuseIfUptoUnsettled } from '../upto/admission.ts';
import type { PaidRequestDeps } from './deps.ts';
import { paymentIdentifierHold, type IdentifierHold } from './identifier-hold.ts';
import { PaidRefusal, type AskForPayment, type PaidOffer, type PaidOutcome } from './outcome.ts';
import type { PaidRequest } from './paid-request.ts';
import { spendWithSiwx } from './siwx-spend.ts';
import { payWithUpto, uptoRefusalClock } from './upto.ts';
import { payWithChannel } from './batch-settlement.ts';
import { isChannelPayment, parseChannelEnvelope, peekEnvelope } from '../channels/channel-payload.ts';
import { receiverAuthorizers } from '../channels/receiver-authorizer.ts';

/** What the client sent instead of an API key: an x402 payment header, or a signed `sign-in-with-x` message. */
export interface PaidCredentials {
  payment?: string;
  siwx?: string;
}

/**
 * A chat or embeddings request without an Authorization header, when payPerRequest.enabled: x402 on
 * the request itself. The body is validated and bounded first by the caller's planning (an invalid
 * request is a 400, never an offer); then a 402 offers this request's price, or the payment sent with it is matched against
 * that price, settled and credited exactly once through the top-up path, and the request runs
 * billed against the payer's wallet like a keyed request. The paid retry is planned again from its
 * own body, so a body changed after the 402 is priced as it is now. Instead of a payment, a wallet
 * with a balance may send the 402's signed `sign-in-with-x` challenge (siwx-spend.ts).
 */
export async function payPerRequest(deps: PaidRequestDeps, paidRequest: PaidRequest, sent: PaidCredentials): Promise<PaidOutcome> {
  try {
    return await decide(deps, paidRequest, sent);
  } catch (err) {
    if (err instanceof PaidRefusal) return err.outcome;
    throw err;
  }
}

async function decide(deps: PaidRequestDeps, paidRequest: PaidRequest, sent: PaidCredentials): Promise<PaidOutcome> {
  const { config } = deps;
  const { plan } = paidRequest;
  const channelAuthorizerFor = config.payPerRequest.batchSettlement.enabled ? await receiverAuthorizers(config, deps.topup.facilitator) : undefined;
  const offer = offerRequest(plan.reservationUsdc, config, deps.topup.uptoFacilitatorFor, channelAuthorizerFor);
  if (offer.kind === 'over-limit') {
    const message =
      `this request may cost up to ${plan.reservationUsdc} micro-USDC, above the largest payment this gateway takes (${config.topup.maxUsd} USD); ` +
      `${paidRequest.shrink}, or top up and use an API key`;
    return { kind: 'invalid', message };
  }
  const { price, offers, uptoOffers, uptoMinChargeUsdc, channelOffers } = offer;
  // With upto offered, the 402 states the least an upto request that produces anything is charged.
  const upto = uptoOffers.length > 0;
  const paidOffer: PaidOffer = {
    resource: `${config.server.publicUrl.replace(/\/$/, '')}${paidRequest.path}`,
    path: paidRequest.path,
    accepts: [...offers, ...uptoOffers, ...channelOffers],
    description: upto
      ? `${paidRequest.description}. Paid with upto: at most ${plan.reservationUsdc} micro-USDC, ` +
        `at least ${uptoMinChargeUsdc} when the request produces anything`
      : paidRequest.description,
    fields: { required_usdc: price, reserved_usdc: plan.reservationUsdc, ...(upto ? { upto_min_charge_usdc: uptoMinChargeUsdc } : {}) },
  };
  const ask: AskForPayment = (code, message, fields = {}) => ({ kind: 'pay', offer: paidOffer, code, message, fields });

  if (sent.payment === undefined) {
    // A payment, when sent, is what the client chose; otherwise a signed SIWX message spends a balance.
    if (sent.siwx !== undefined) return spendWithSiwx(deps, paidRequest, sent.siwx, ask);
    return ask(
      'PAYMENT_REQUIRED',
      `pay ${price / 1e6} USD with one of accepts (x402: PAYMENT-SIGNATURE or X-Payment header) and send the same request again, or use an API key`,
    );
  }
  // A channel payment is told apart before the exact/upto decoder, which knows no channel payloads.
  const envelope = peekEnvelope(sent.payment);
  if (isChannelPayment(envelope)) {
    if (channelOffers.length === 0)
      throw paymentMismatch('scheme "batch-settlement" is not offered for this request; pay with an entry of the 402 response\'s accepts');
    return payWithChannel(deps, { paidRequest, envelope: parseChannelEnvelope(envelope), channelOffers, paidOffer, ask });
  }
  const decoded = decodePaymentHeader(sent.payment);
  const paid = matchPaidPayment(decoded, offer, config);
  if (paid.kind === 'answers-no-offer') throw paymentMismatch(`the payment's amount answers no offer; pay one of accepts`);
  if (paid.kind === 'insufficient') {
    return ask(
      'PAYMENT_INSUFFICIENT',
      `the payment is for ${paid.paid} micro-USDC but this request costs ${price}; nothing was settled. Sign a payment for one of accepts`,
      { paid_usdc: paid.paid },
    );
  }
  // Read before any settle (a bad id is a 400), claimed once the payer is known to have signed
  // (never for a payer a forged header merely names), before anything is recorded: a retry under
  // the same payment identifier is a 409 with its payment never sent, exact or upto.
  const hold = paymentIdentifierHold(deps, decoded.envelope, paid.matched);
  try {
    if (paid.matched.requirements.scheme === 'upto') {
      return await payWithUpto(deps, { paidRequest, matched: paid.matched, ask, minChargeUsdc: uptoMinChargeUsdc, identifier: hold });
    }
    // The facilitator's discovery catalogs what arrives with the payments it settles (x402 bazaar
    // spec, "Facilitator Behavior"): the route's resource and this gateway's own bazaar entry. The
    // client's echo of the extensions is never forwarded: a client could have changed it to poison the listing.
    const resource = { url: paidOffer.resource, description: paidRequest.description, mimeType: 'application/json' };
    const matched = {
      ...paid.matched,
      payload: { ...paid.matched.payload, resource, extensions: { bazaar: deps.bazaar(paidRequest.path) } },
      requestDigest: paidRequest.requestDigest,
    };
    return await settleAndRun(deps, paidRequest, matched, ask, hold);
  } finally {
    // Every path that does not run the request frees the identifier, a throw included.
    await hold?.finish();
  }
}

/** Settles the matched payment and runs the request it pays for, or answers why not. */
async function settleAndRun(
  deps: PaidRequestDeps,
  paidRequest: PaidRequest,
  matched: MatchedPayment,
  ask: AskForPayment,
  hold: IdentifierHold | undefined,
): Promise<PaidOutcome> {
  // The wallet's limit applies as to its keys, before any money moves, but only once the payer is
  // known to have signed: the payer a header names is the client's word until the facilitator has
  // verified it, and a forged header must not use up someone else's window (their keys' 429s).
  // A payment already recorded (a replay, or one being settled by a concurrent request) carries
  // the signature that was verified for it, and is counted before it runs.
  let counted = false;
  const countRequest = async () => {
    counted = true;
    await deps.countRequest(matched.identity.payer);
  };
  // A wallet whose upto payment could not be settled pays nothing more until it is, said only once
  // the payer is known to have signed (a forged header learns nothing of the wallet's upto state).
  const admitSigned = async () => {
    await refuseIfUptoUnsettled(deps.db, matched.identity.payer, uptoRefusalClock(deps));
    await hold?.claim();
  };
  const outcome = await settleMatched(deps.settle, matched, { admitSigned, admitVerified: countRequest });
  switch (outcome.kind) {
    case 'unavailable':
      return { kind: 'facilitator-unavailable', reason: outcome.reason };
    case 'rejected':
      if (outcome.reason === TOPUP_PAYMENT) return refuseTopupPayment(matched.identity.payer, ask);
      if (mustNotPayAgain(outcome.reason)) return ask('PAYMENT_REJECTED', `${outcome.reason}; the request did not run`, { reason: outcome.reason });
      return ask(
        'PAYMENT_REJECTED',
        `the payment was rejected (${outcome.reason}); nothing was credited and the request did not run. Sign a new payment for one of accepts`,
        { reason: outcome.reason },
      );
    case 'pending':
      hold?.keepPending();
      return { kind: 'pending', transaction: outcome.payment.tx_hash };
    case 'credited': {
      // Refusals first: a header that runs nothing (a top-up's, or a replay past its window) must
      // not use up the payer's chat window either (a leaked header would otherwise 429 their keys).
      const refused = refusePaid(deps, outcome.payment, !outcome.opened, matched.requestDigest!, ask);
      if (refused) return refused;
      if (!counted) await countRequest();
      await hold?.start();
      return runPaid(deps, paidRequest, outcome.payment, ask, hold);
    }
  }
}

/** Answers a credited payment that may not run this request (payments/pay-per-request/may-run.ts); undefined when it may. */
function refusePaid(deps: PaidRequestDeps, payment: PaymentRow, replayed: boolean, requestDigest: string, ask: AskForPayment): PaidOutcome | undefined {
  const { maxTimeoutSeconds } = deps.config.topup;
  const verdict = mayRunPaid(payment, replayed, requestDigest, maxTimeoutSeconds);
  switch (verdict.kind) {
    case 'topup-payment':
      return refuseTopupPayment(payment.payer, ask);
    case 'other-request':
      return ask(
        'PAYMENT_REJECTED',
        `this payment was first sent with another request (another body or route) and pays for that request only; nothing more was credited and this request did not run. Sign a new payment for one of accepts`,
        { reason: OTHER_REQUEST },
      );
    case 'expired':
      return ask(
        'PAYMENT_EXPIRED',
        `this payment was credited to ${payment.payer}'s balance earlier and no longer pays for requests (a payment is good for ${maxTimeoutSeconds} s at most); sign a new payment for one of accepts, or spend the balance with an API key`,
      );
    case 'runs':
      return undefined;
  }
}

/** The refusal's reason when a payment is sent with a request other than the one it was first sent with. */
export const OTHER_REQUEST = 'payment_for_another_request';

function refuseTopupPayment(payer: string, ask: AskForPayment): PaidOutcome {
  return ask(
    'PAYMENT_REJECTED',
    `this payment is a top-up of ${payer}'s balance (credited there, or being credited); a top-up's payment never pays for requests. Spend the balance with an API key, or sign a new payment for one of accepts`,
    { reason: TOPUP_PAYMENT },
  );
}

async function runPaid(
  deps: PaidRequestDeps,
  { plan, run, shrink }: PaidRequest,
  payment: PaymentRow,
  ask: AskForPayment,
  hold: IdentifierHold | undefined,
): Promise<PaidOutcome> {
  const key = await payPerRequestKey(deps.db, payment.payer);
  // Before the first byte: a stream sends its headers as soon as it starts.
  deps.showReceipt(payment);
  const ran = await run(key, { capAtReservation: true });
  if (ran.ok) return { kind: 'ran' };
  hold?.notRun();
  deps.showReceipt(null);
  if (ran.refused === 'key_limit') {
    // The owner's spend limit on the wallet's pay-per-request key, not the balance (the payment was
    // credited and covers the request): said as such, or the payer signs payment after payment,
    // each credited and refused the same way.
    const refusal = await reservationRefusal(deps.db, key, plan, ran, shrink);
    return ask(
      'KEY_LIMIT_EXCEEDED',
      `${refusal.message}; the payment (${payment.amount_usdc} micro-USDC) is in ${payment.payer}'s balance, and no payment runs this request until the limit allows it`,
      refusal.extra,
    );
  }
  const balance = await getBalance(deps.db, payment.payer);
  return ask(
    'INSUFFICIENT_BALANCE',
    `this payment was already credited once (${payment.amount_usdc} micro-USDC to ${payment.payer}) and the wallet's available balance of ${balance.available_usdc} no longer covers this request's ${plan.reservationUsdc}; nothing more was credited and the request did not run. Sign a new payment for one of accepts`,
    { balance_usdc: balance.balance_usdc, available_usdc: balance.available_usdc },
  );
}
