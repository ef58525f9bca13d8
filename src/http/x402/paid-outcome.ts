import type { FastifyReply } from 'fastify';
import type { PaidOutcome } from '../../payments/paid-request/outcome.ts';
import { ApiError, badRequest } from '../../refusal.ts';
import type { Services } from '../../services.ts';
import { paidRequestExtensions } from './extensions.ts';
import { askForPayment, facilitatorUnavailable } from './payment-wire.ts';

/** Seconds a pending payment, or a payment identifier another request is paying for, asks the client to wait. */
const PAYMENT_RETRY_AFTER_SECONDS = 5;

/**
 * Writes what the paid-request workflow decided (src/payments/paid-request/outcome.ts) as HTTP: a
 * 402 with this request's offers and the x402 extensions, or the refusal's status, code and
 * headers (thrown, so the route's error format writes it, as for every other refusal).
 */
export function answerPaidOutcome(services: Services, reply: FastifyReply, outcome: PaidOutcome): FastifyReply {
  switch (outcome.kind) {
    case 'ran':
      return reply;
    case 'pay': {
      const { offer } = outcome;
      const extensions = paidRequestExtensions(services, offer.resource, offer.path);
      const p = { resource: offer.resource, offers: offer.accepts, code: outcome.code, message: outcome.message, description: offer.description };
      return askForPayment(reply, { ...p, v1Body: services.config.topup.x402v1Body, extensions }, { ...offer.fields, ...outcome.fields });
    }
    case 'refunded':
      return reply.code(200).send({ refunded_usdc: outcome.refundedUsdc, channel_id: outcome.channelId, transaction: outcome.transaction });
    case 'invalid':
      throw badRequest(outcome.message);
    case 'facilitator-unavailable':
      throw facilitatorUnavailable(outcome.reason);
    case 'pending':
      throw new ApiError(
        503,
        'PAYMENT_PENDING',
        'the payment was sent but is not confirmed yet, so the request did not run; send the same request with the same payment again in a few seconds (it is credited once, never twice)',
        { transaction: outcome.transaction },
        { 'retry-after': String(PAYMENT_RETRY_AFTER_SECONDS) },
      );
    case 'siwx-unavailable':
      throw new ApiError(503, 'SERVICE_UNAVAILABLE', outcome.reason, {}, { 'retry-after': String(PAYMENT_RETRY_AFTER_SECONDS) });
    case 'identifier-conflict': {
      const headers: Record<string, string> = outcome.retryLater ? { 'retry-after': String(PAYMENT_RETRY_AFTER_SECONDS) } : {};
      throw new ApiError(409, 'PAYMENT_IDENTIFIER_CONFLICT', outcome.message, outcome.fields, headers);
    }
  }
}
