import type { FastifyReply, FastifyRequest } from 'fastify';
import { planInbound } from '../../chat/plan-inbound.ts';
import type { InboundTranslator } from '../../protocols/inbound.ts';
import { runChat } from '../../chat/run.ts';
import { getBalance } from '../../ledger/balances.ts';
import { mayRunPaid } from '../pay-per-request/may-run.ts';
import { matchPaidPayment, offerRequest } from '../pay-per-request/offer.ts';
import { payPerRequestKey } from '../pay-per-request/wallet-key.ts';
import type { Services } from '../../services.ts';
import { decodePaymentHeader } from '../decode.ts';
import { paymentMismatch, type MatchedPayment } from '../match.ts';
import { TOPUP_PAYMENT, type PaymentRow } from '../payment-store.ts';
import { settleMatched } from '../settle-matched.ts';
import { mustNotPayAgain } from '../rejection-message.ts';
import { ApiError, badRequest } from '../../refusal.ts';
import { enforceRateLimit } from '../../http/rate-limit.ts';
import { refuseUnconfiguredProvider } from '../../http/inference/provider-ready.ts';
import { askForPayment, facilitatorUnavailable, paymentHeader, setReceipt, settleDepsOf, type AskForPayment } from '../../http/x402/payment-wire.ts';
import { discoverablePayload, paidRequestExtensions } from '../../http/x402/extensions.ts';
import { siwxHeader, spendWithSiwx } from './siwx-spend.ts';
import { paymentIdentifierHold, type IdentifierHold } from './identifier-hold.ts';
import { exchangeOf } from '../../http/inference/reply-sink.ts';
import type { PaidRequest } from './paid-request.ts';
import { payWithUpto, uptoRefusalClock } from './upto.ts';
import { refuseIfUptoUnsettled } from '../upto/admission.ts';

/** A chat request of `inbound`'s protocol, paid for. */
export function paidChat(services: Services, request: FastifyRequest, reply: FastifyReply, inbound: InboundTranslator): PaidRequest {
  const plan = planInbound(inbound, request.body, services.catalog, services.config);
  return {
    plan,
    path: inbound.path,
    description: 'One Tollgate chat completion; what it does not use stays in your wallet balance',
    shrink: 'lower max_tokens or n',
    run: (key, opts) => runChat(services.chat, exchangeOf(request, reply, inbound), key, plan, opts),
  };
}

/**
 * A chat or embeddings request without an Authorization header, when payPerRequest.enabled: x402 on
 * the request itself. The body is validated and bounded first by the caller's planning (an invalid
 * request is a 400, never an offer); then a 402 offers this request's price, or the payment sent with it is matched against
 * that price, settled and credited exactly once through the top-up path, and the request runs
 * billed against the payer's wallet like a keyed request. The paid retry is planned again from its
 * own body, so a body changed after the 402 is priced as it is now. Instead of a payment, a wallet
 * with a balance may send the 402's signed `sign-in-with-x` challenge (siwx-spend.ts); every 402
 * carries the x402 extensions of x402-extensions.ts.
 */
export async function payPerRequest(services: Services, request: FastifyRequest, reply: FastifyReply, paidRequest: PaidRequest): Promise<FastifyReply> {
  const { config } = services;
  if (!config.payPerRequest.enabled || !services.topup) throw new ApiError(500, 'INTERNAL_ERROR', 'pay-per-request reached with pay-per-request off');
  const { plan } = paidRequest;
  // Never offer, let alone take, a payment for a request no provider can serve.
  refuseUnconfiguredProvider(services, request, plan);
  const offer = offerRequest(plan.reservationUsdc, config, services.topup.uptoFacilitatorFor);
  if (offer.kind === 'over-limit') {
    throw badRequest(`this request may cost up to ${plan.reservationUsdc} micro-USDC, above the largest payment this gateway takes (${config.topup.maxUsd} USD); ${paidRequest.shrink}, or top up and use an API key`);
  }
  const { price, offers, uptoOffers, uptoMinChargeUsdc } = offer;
  const resource = `${config.server.publicUrl.replace(/\/$/, '')}${paidRequest.path}`;
  // With upto offered, the 402 states the least an upto request that produces anything is charged.
  const upto = uptoOffers.length > 0;
  const description = upto ? `${paidRequest.description}. Paid with upto: at most ${plan.reservationUsdc} micro-USDC, at least ${uptoMinChargeUsdc} when the request produces anything` : paidRequest.description;
  const ask: AskForPayment = (code, message, extra = {}) =>
    askForPayment(
      reply,
      { resource, offers: [...offers, ...uptoOffers], code, message, description, v1Body: config.topup.x402v1Body, extensions: paidRequestExtensions(services, resource, paidRequest.path) },
      { required_usdc: price, reserved_usdc: plan.reservationUsdc, ...(upto ? { upto_min_charge_usdc: uptoMinChargeUsdc } : {}), ...extra },
    );

  const header = paymentHeader(request.headers);
  if (header === undefined) {
    // A payment, when sent, is what the client chose; otherwise a signed SIWX message spends a balance.
    const siwx = siwxHeader(request.headers);
    if (siwx !== undefined) return spendWithSiwx(services, request, reply, paidRequest, siwx, ask);
    return ask('PAYMENT_REQUIRED', `pay ${price / 1e6} USD with one of accepts (x402: PAYMENT-SIGNATURE or X-Payment header) and send the same request again, or use an API key`);
  }
  const decoded = decodePaymentHeader(header);
  const paid = matchPaidPayment(decoded, offer, config);
  if (paid.kind === 'answers-no-offer') throw paymentMismatch(`the payment's amount answers no offer; pay one of accepts`);
  if (paid.kind === 'insufficient') {
    return ask('PAYMENT_INSUFFICIENT', `the payment is for ${paid.paid} micro-USDC but this request costs ${price}; nothing was settled. Sign a payment for one of accepts`, { paid_usdc: paid.paid });
  }
  // Read before any settle (a bad id is a 400), claimed once the payer is known to have signed
  // (never for a payer a forged header merely names), before anything is recorded: a retry under
  // the same payment identifier is a 409 with its payment never sent, exact or upto.
  const hold = paymentIdentifierHold(services, request, decoded.envelope, paid.matched);
  try {
    if (paid.matched.requirements.scheme === 'upto') {
      return await payWithUpto(services, request, reply, { paidRequest, matched: paid.matched, ask, minChargeUsdc: uptoMinChargeUsdc, identifier: hold });
    }
    const matched = { ...paid.matched, payload: discoverablePayload(services, paid.matched.payload, { url: resource, description: paidRequest.description, mimeType: 'application/json' }, paidRequest.path) };
    return await settleAndRun(services, request, reply, paidRequest, matched, ask, hold);
  } finally {
    // Every path that does not run the request frees the identifier, a throw included.
    await hold?.finish();
  }
}

/** Settles the matched payment and runs the request it pays for, or answers why not. */
async function settleAndRun(
  services: Services,
  request: FastifyRequest,
  reply: FastifyReply,
  paidRequest: PaidRequest,
  matched: MatchedPayment,
  ask: AskForPayment,
  hold: IdentifierHold | undefined,
): Promise<FastifyReply> {
  // The wallet's limit applies as to its keys, before any money moves, but only once the payer is
  // known to have signed: the payer a header names is the client's word until the facilitator has
  // verified it, and a forged header must not use up someone else's window (their keys' 429s).
  // A payment already recorded (a replay, or one being settled by a concurrent request) carries
  // the signature that was verified for it, and is counted before it runs.
  let counted = false;
  const countRequest = async () => {
    counted = true;
    await enforceRateLimit(services, reply, `chat:${matched.identity.payer}`, services.rateWindows.chat);
  };
  // A wallet whose upto payment could not be settled pays nothing more until it is, said only once
  // the payer is known to have signed (a forged header learns nothing of the wallet's upto state).
  const admitSigned = async () => {
    await refuseIfUptoUnsettled(services.storage.db, matched.identity.payer, uptoRefusalClock(services));
    await hold?.claim();
  };
  const outcome = await settleMatched(settleDepsOf(services, request.log), matched, { admitSigned, admitVerified: countRequest });
  switch (outcome.kind) {
    case 'unavailable':
      throw facilitatorUnavailable(outcome.reason);
    case 'rejected':
      if (outcome.reason === TOPUP_PAYMENT) return refuseTopupPayment(matched.identity.payer, ask);
      if (mustNotPayAgain(outcome.reason)) return ask('PAYMENT_REJECTED', `${outcome.reason}; the request did not run`, { reason: outcome.reason });
      return ask('PAYMENT_REJECTED', `the payment was rejected (${outcome.reason}); nothing was credited and the request did not run. Sign a new payment for one of accepts`, { reason: outcome.reason });
    case 'pending':
      hold?.keepPending();
      throw new ApiError(
        503,
        'PAYMENT_PENDING',
        'the payment was sent but is not confirmed yet, so the request did not run; send the same request with the same payment again in a few seconds (it is credited once, never twice)',
        { transaction: outcome.payment.tx_hash },
        { 'retry-after': '5' },
      );
    case 'credited': {
      // Refusals first: a header that runs nothing (a top-up's, or a replay past its window) must
      // not use up the payer's chat window either (a leaked header would otherwise 429 their keys).
      const refused = refusePaid(services, outcome.payment, !outcome.opened, ask);
      if (refused) return refused;
      if (!counted) await countRequest();
      await hold?.start();
      return runPaid(services, reply, paidRequest, outcome.payment, ask, hold);
    }
  }
}

/** Answers a credited payment that may not run this request (payments/pay-per-request/may-run.ts); undefined when it may. */
function refusePaid(
  services: Services,
  payment: PaymentRow,
  replayed: boolean,
  ask: AskForPayment,
): FastifyReply | undefined {
  const { maxTimeoutSeconds } = services.config.topup;
  const verdict = mayRunPaid(payment, replayed, maxTimeoutSeconds);
  switch (verdict.kind) {
    case 'topup-payment':
      return refuseTopupPayment(payment.payer, ask);
    case 'expired':
      return ask('PAYMENT_EXPIRED', `this payment was credited to ${payment.payer}'s balance earlier and no longer pays for requests (a payment is good for ${maxTimeoutSeconds} s at most); sign a new payment for one of accepts, or spend the balance with an API key`);
    case 'runs':
      return undefined;
  }
}

function refuseTopupPayment(payer: string, ask: AskForPayment): FastifyReply {
  return ask(
    'PAYMENT_REJECTED',
    `this payment is a top-up of ${payer}'s balance (credited there, or being credited); a top-up's payment never pays for requests. Spend the balance with an API key, or sign a new payment for one of accepts`,
    { reason: TOPUP_PAYMENT },
  );
}

async function runPaid(
  services: Services,
  reply: FastifyReply,
  { plan, run }: PaidRequest,
  payment: PaymentRow,
  ask: AskForPayment,
  hold: IdentifierHold | undefined,
): Promise<FastifyReply> {
  const key = await payPerRequestKey(services.storage.db, payment.payer);
  // Before the first byte: a stream sends its headers as soon as it starts.
  setReceipt(reply, payment);
  if ((await run(key, { capAtReservation: true })).ok) return reply;
  hold?.notRun();
  reply.removeHeader('payment-response');
  reply.removeHeader('x-payment-response');
  const balance = await getBalance(services.storage.db, payment.payer);
  return ask(
    'INSUFFICIENT_BALANCE',
    `this payment was already credited once (${payment.amount_usdc} micro-USDC to ${payment.payer}) and the wallet's available balance of ${balance.available_usdc} no longer covers this request's ${plan.reservationUsdc}; nothing more was credited and the request did not run. Sign a new payment for one of accepts`,
    { balance_usdc: balance.balance_usdc, available_usdc: balance.available_usdc },
  );
}
