import { rejectionMessage } from '../../topup/rejection-message.ts';
import { clientBucket } from '../client-bucket.ts';
import { encodePaymentRequiredHeader, encodePaymentResponseHeader } from '@x402/core/http';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Services } from '../../services.ts';
import { decodePaymentHeader, invalidPayment } from '../../topup/decode.ts';
import { matchPayment } from '../../topup/match.ts';
import { buildOffers, parseTopupAmount, paymentRequired, type Offer } from '../../topup/offers.ts';
import type { PaymentRow } from '../../topup/payment-store.ts';
import { settleTopup } from '../../topup/settle-payment.ts';
import { ApiError } from '../errors.ts';
import { enforceRateLimit } from '../rate-limit.ts';

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
      return askForPayment(reply, resource, offers, 'PAYMENT_REQUIRED', `pay ${micro / 1e6} USD with one of accepts, sent as base64 in the PAYMENT-SIGNATURE (x402 v2) or X-Payment (v1) header`);
    }
    const matched = matchPayment(decodePaymentHeader(header), offers);
    await topup.admitPayer(matched);
    const outcome = await settleTopup(
      {
        db: services.storage.db,
        facilitator: topup.facilitator,
        client: topup.clientFor(matched.identity.network)!,
        logger: request.log,
        settleWaitMs: config.topup.settleWaitSeconds * 1000,
        now: Date.now,
        beforeBroadcast: topup.beforeBroadcast,
      },
      matched,
    );
    services.metrics.topups.inc({ outcome: outcome.kind });
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
        return askForPayment(reply, resource, offers, 'PAYMENT_REJECTED', rejectionMessage(outcome.reason, matched), {
          reason: outcome.reason,
        });
      case 'unavailable':
        throw new ApiError(503, 'FACILITATOR_UNAVAILABLE', `${outcome.reason}; nothing was settled or credited. Try again in a minute with the same payment`);
    }
  });
}

function paymentHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers['payment-signature'] ?? headers['x-payment'];
  if (Array.isArray(value)) throw invalidPayment('send exactly one payment header');
  return value;
}

function askForPayment(reply: FastifyReply, resource: string, offers: Offer[], code: string, message: string, extra: Record<string, unknown> = {}) {
  const required = paymentRequired(resource, offers, code);
  return reply
    .code(402)
    .header('payment-required', encodePaymentRequiredHeader(required))
    .send({ ...required, message, ...extra });
}

/** The first credit's result, also for replays of the same payment (never a second credit). */
export function sendCredited(reply: FastifyReply, p: PaymentRow) {
  const receipt = encodePaymentResponseHeader({ success: true, transaction: p.tx_hash!, network: p.network as `${string}:${string}`, payer: p.payer });
  const balance = Number(p.balance_after_usdc);
  const locked = Number(p.locked_after_usdc);
  return reply
    .header('payment-response', receipt)
    .header('x-payment-response', receipt)
    .send({
      wallet: p.payer,
      credited_usdc: Number(p.amount_usdc),
      balance_usdc: balance,
      locked_usdc: locked,
      available_usdc: balance - locked,
      transaction: p.tx_hash,
      network: p.network,
    });
}
