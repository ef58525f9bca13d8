import type { FastifyReply, FastifyRequest } from 'fastify';
import { planInbound } from '../../metered/plan/inbound.ts';
import { runChat } from '../../metered/run.ts';
import type { PaidRequest } from '../../payments/paid-request/paid-request.ts';
import { payPerRequest as decidePaidRequest } from '../../payments/paid-request/pay-per-request.ts';
import { requestDigest } from '../../payments/pay-per-request/request-digest.ts';
import type { InboundTranslator } from '../../protocols/inbound.ts';
import { ApiError } from '../../refusal.ts';
import type { Services } from '../../services.ts';
import { refuseUnconfiguredProvider } from '../inference/provider-ready.ts';
import { exchangeOf } from '../inference/reply-sink.ts';
import { answerPaidOutcome } from './paid-outcome.ts';
import { paidRequestPort } from './paid-request-port.ts';
import { paymentHeader, siwxHeader } from './payment-wire.ts';

/** A chat request of `inbound`'s protocol, paid for. */
export function paidChat(services: Services, request: FastifyRequest, reply: FastifyReply, inbound: InboundTranslator): PaidRequest {
  // Planned as a keyed request is (src/http/routes/chat.ts): a native Messages request's betas are
  // sorted (price-neutral ones forwarded, priced ones a 400 before any offer or settle), and the
  // plan's headers (betas not forwarded, a lowered max_tokens) go out with the answer.
  const plan = planInbound(inbound, request.body, services.catalog, services.config, { betas: request.headers['anthropic-beta'] });
  return {
    plan,
    path: inbound.path,
    description: 'One Tollgate chat completion; what it does not use stays in your wallet balance',
    shrink: 'lower max_tokens or n',
    requestDigest: requestDigest(inbound.path, request.body),
    run: (key, opts) => {
      void reply.headers(plan.responseHeaders ?? {});
      return runChat(services.chat, exchangeOf(request, reply, inbound), key, plan, opts);
    },
  };
}

/**
 * A chat or embeddings request without an Authorization header, when payPerRequest.enabled: the
 * payment or the `sign-in-with-x` message it carries is read from its headers, the workflow of
 * src/payments/paid-request/ decides (offer, settle, run), and its outcome is written as HTTP
 * (paid-outcome.ts).
 */
export async function payPerRequest(services: Services, request: FastifyRequest, reply: FastifyReply, paidRequest: PaidRequest): Promise<FastifyReply> {
  if (!services.config.payPerRequest.enabled || !services.topup) throw new ApiError(500, 'INTERNAL_ERROR', 'pay-per-request reached with pay-per-request off');
  // Never offer, let alone take, a payment for a request no provider can serve.
  refuseUnconfiguredProvider(services, request, paidRequest.plan);
  const payment = paymentHeader(request.headers);
  // A payment, when sent, is what the client chose; a sign-in-with-x header is read only without one.
  const sent = payment !== undefined ? { payment } : { siwx: siwxHeader(request.headers) };
  const outcome = await decidePaidRequest(paidRequestPort(services, request, reply), paidRequest, sent);
  return answerPaidOutcome(services, reply, outcome);
}
