import type { FastifyInstance } from 'fastify';
import { CHANNEL_REFUND_PATH, channelRefundRequest } from '../../payments/channels/refund-request.ts';
import { notFound } from '../../refusal.ts';
import type { Services } from '../../services.ts';
import { clientBucket } from '../client-bucket.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { answerPaidOutcome } from '../x402/paid-outcome.ts';
import { paidRequestPort } from '../x402/paid-request-port.ts';
import { paymentHeader } from '../x402/payment-wire.ts';

/**
 * GET /v1/channels/refund (payPerRequest.batchSettlement): a payer's cooperative refund of its
 * channel, as the stock `@x402/evm` client asks for it (a GET probe for the 402, then the same GET
 * with the refund payload). src/payments/channels/refund-request.ts decides.
 */
export function channelRefundRoutes(app: FastifyInstance, services: Services): void {
  app.get(CHANNEL_REFUND_PATH, async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const { payPerRequest } = services.config;
    if (!payPerRequest.enabled || !payPerRequest.batchSettlement.enabled || !services.topup) {
      throw notFound('this gateway offers no batch-settlement channels (payPerRequest.batchSettlement is off)');
    }
    const outcome = await channelRefundRequest(paidRequestPort(services, request, reply), paymentHeader(request.headers));
    return answerPaidOutcome(services, reply, outcome);
  });
}
