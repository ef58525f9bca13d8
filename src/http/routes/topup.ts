import { rejectionMessage } from '../../payments/rejection-message.ts';
import { clientBucket } from '../client-bucket.ts';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Services } from '../../services.ts';
import { decodePaymentHeader } from '../../payments/decode.ts';
import { buildOffers, parseTopupAmount } from '../../payments/offers.ts';
import type { PaymentRow } from '../../payments/payment-row.ts';
import { ApiError } from '../../refusal.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { settleMatched } from '../../payments/settle-matched.ts';
import { refuseIfUptoUnsettled } from '../../payments/upto/admission.ts';
import { askForPayment, facilitatorUnavailable, paymentHeader, setReceipt, settleDepsOf } from '../x402/payment-wire.ts';

/**
 * POST /v1/topup: x402 in two steps. Without a payment: 402 with the offers for the requested
 * amount, in the body and in PAYMENT-REQUIRED (what @x402/fetch reads). With one (PAYMENT-SIGNATURE
 * or X-Payment, x402 v1 or v2): decode, match against our own offer, verify, settle, confirm on
 * chain, credit once.
 */
export function topupRoutes(app: FastifyInstance, services: Services): void {
  app.post('/v1/topup', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const { config } = services;
    const micro = parseTopupAmount(request.body, config.topup);
    const topup = services.topup;
    if (!topup) {
      throw new ApiError(503, 'TOPUP_UNAVAILABLE', 'this gateway accepts no payments yet: its operator has not configured topup.offers');
    }
    const offers = buildOffers(config.topup, micro);
    const resource = `${config.server.publicUrl.replace(/\/$/, '')}/v1/topup`;

    const header = paymentHeader(request.headers);
    if (header === undefined) {
      return askForPayment(reply, {
        resource,
        offers,
        code: 'PAYMENT_REQUIRED',
        v1Body: config.topup.x402v1Body,
        message: `pay ${micro / 1e6} USD with one of accepts, sent as base64 in the PAYMENT-SIGNATURE (x402 v2) or X-Payment (v1) header`,
      });
    }
    // The payment path (x402's EVM scheme, viem) is loaded by the first payment, not at start-up.
    const { matchPayment } = await import('../../payments/match.ts');
    const matched = matchPayment(decodePaymentHeader(header), offers);
    // A wallet with an unsettled upto payment tops up nothing until it is settled or written off
    // (SECURITY.md 1.11): refused once its signature is known to be the payer's, never before.
    const admitSigned = () => refuseIfUptoUnsettled(services.storage.db, matched.identity.payer);
    const outcome = await settleMatched(settleDepsOf(services, request.log), matched, { admitSigned });
    switch (outcome.kind) {
      case 'credited':
        return sendCredited(reply, outcome.payment);
      case 'pending':
        return reply.code(202).send({
          status: 'pending',
          payment_id: outcome.payment.id,
          transaction: outcome.payment.tx_hash,
          message: 'the payment was sent but is not confirmed yet; it will be credited once it settles (see GET /v1/topups/:wallet). Do not pay again.',
        });
      case 'rejected':
        return askForPayment(
          reply,
          { resource, offers, code: 'PAYMENT_REJECTED', message: rejectionMessage(outcome.reason, matched), v1Body: config.topup.x402v1Body },
          { reason: outcome.reason },
        );
      case 'unavailable':
        throw facilitatorUnavailable(outcome.reason);
    }
  });
}

/** The first credit's result, also for replays of the same payment (never a second credit). */
export function sendCredited(reply: FastifyReply, p: PaymentRow) {
  const balance = Number(p.balance_after_usdc);
  const locked = Number(p.locked_after_usdc);
  return setReceipt(reply, p).send({
    wallet: p.payer,
    credited_usdc: Number(p.amount_usdc),
    balance_usdc: balance,
    locked_usdc: locked,
    available_usdc: balance - locked,
    transaction: p.tx_hash,
    network: p.network,
  });
}
