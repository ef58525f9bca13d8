import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { planEmbeddings, type EmbeddingsPlan } from '../../embeddings/plan.ts';
import { runEmbeddings } from '../../embeddings/run.ts';
import type { Services } from '../../services.ts';
import { OPENAI_COMPATIBLE } from '../error-format.ts';
import { authenticateSpender, spenderKey } from '../auth/inference-auth.ts';
import { assertModelAllowed } from '../auth/key-checks.ts';
import { reservationRefusal } from '../../metered/reservation-refusal.ts';
import type { PaidRequest } from '../../payments/paid-request/paid-request.ts';
import { requestDigest } from '../../payments/pay-per-request/request-digest.ts';
import { refuseUnconfiguredProvider } from '../inference/provider-ready.ts';
import { replySink } from '../inference/reply-sink.ts';

const SHRINK = 'send fewer or shorter inputs';

/**
 * POST /v1/embeddings, OpenAI's embeddings API: keyed or paid per request like chat, reserved at the
 * inputs' bound, billed at the provider's reported prompt tokens (src/embeddings/).
 */
export function embeddingsRoutes(app: FastifyInstance, services: Services): void {
  const options = { ...OPENAI_COMPATIBLE, bodyLimit: services.config.limits.chatBodyBytes, onRequest: authenticateSpender(services) };
  app.post('/v1/embeddings', options, async (request, reply) => {
    const plan = planEmbeddings(request.body, services.catalog);
    const key = await spenderKey(services, request);
    if (!key) {
      // Loaded by the first anonymous request: it pulls in x402's payment code.
      const { payPerRequest } = await import('../x402/pay-per-request.ts');
      return payPerRequest(services, request, reply, paidEmbeddings(services, request, reply, plan));
    }
    assertModelAllowed(key, plan.model.id);
    refuseUnconfiguredProvider(services, request, plan);
    const reserved = await runEmbeddings(services.chat, replySink(reply), request.id, key, plan);
    if (reserved.ok) return reply;
    throw await reservationRefusal(services.storage.db, key, plan, reserved, SHRINK);
  });
}

function paidEmbeddings(services: Services, request: FastifyRequest, reply: FastifyReply, plan: EmbeddingsPlan): PaidRequest {
  return {
    plan,
    path: '/v1/embeddings',
    description: 'One Tollgate embeddings request; what it does not use stays in your wallet balance',
    shrink: SHRINK,
    requestDigest: requestDigest('/v1/embeddings', request.body),
    run: (key, opts) => runEmbeddings(services.chat, replySink(reply), request.id, key, plan, opts),
  };
}
