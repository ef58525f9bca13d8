import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RequestBill } from '../../chat/bill.ts';
import { completeChat } from '../../chat/complete.ts';
import { planChat } from '../../chat/plan.ts';
import { streamChat } from '../../chat/stream.ts';
import { tryReserve } from '../../ledger/reservations.ts';
import type { Services } from '../../services.ts';
import { requireApiKey } from '../bearer-auth.ts';
import { ApiError } from '../errors.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { assertModelAllowed, reservationRefusal } from '../key-checks.ts';
import type { KeyRow } from '../../keys/api-keys.ts';

/** The key each chat request was authenticated with, set before its body is read. */
const keyOf = new WeakMap<FastifyRequest, KeyRow>();

export function chatRoutes(app: FastifyInstance, services: Services): void {
  // The key and the wallet's rate limit are checked on the headers alone (onRequest runs before the
  // body is read): an anonymous or rate-limited client gets its 401 or 429 without the gateway
  // reading, let alone parsing, up to limits.chatBodyBytes of JSON.
  const authenticate = async (request: FastifyRequest, reply: FastifyReply) => {
    const key = await requireApiKey(services, request);
    await enforceRateLimit(services, reply, `chat:${key.wallet}`, services.rateWindows.chat);
    keyOf.set(request, key);
  };
  app.post('/v1/chat/completions', { bodyLimit: services.config.limits.chatBodyBytes, onRequest: authenticate }, async (request, reply) => {
    // Everything that can refuse the request is decided before the first byte of the answer, so a
    // stream that cannot be paid for is a plain 402, not a broken stream.
    const key = keyOf.get(request);
    if (!key) throw new ApiError(500, 'INTERNAL_ERROR', 'chat request reached its handler unauthenticated');
    const plan = planChat(request.body, services.catalog, services.config);
    assertModelAllowed(key, plan.model.id);
    const adapter = services.providers.get(plan.model.provider);
    if (!adapter) throw new ApiError(500, 'INTERNAL_ERROR', `provider ${plan.model.provider} is not configured`);

    const leaseMs = services.config.chat.reservationLeaseSeconds * 1000;
    const reserved = await tryReserve(services.storage, {
      wallet: key.wallet, apiKeyId: key.id, requestId: request.id, amountUsdc: plan.reservationUsdc, leaseMs, keyHasLimit: key.spend_limit_usdc !== null,
    });
    if (!reserved.ok) throw await reservationRefusal(services, key, plan, reserved);

    const bill = new RequestBill(services, key, plan, request.id);
    try {
      if (plan.stream) await streamChat(services, reply, plan, adapter, bill);
      else await completeChat(services, reply, plan, adapter, bill);
    } finally {
      await bill.voidIfOpen('error');
    }
    return reply;
  });
}
