import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RequestBill } from '../../chat/bill.ts';
import { completeChat } from '../../chat/complete.ts';
import { planChat } from '../../chat/plan.ts';
import { streamChat } from '../../chat/stream.ts';
import { getBalance } from '../../ledger/balances.ts';
import { reserve } from '../../ledger/reservations.ts';
import type { Services } from '../../services.ts';
import { requireApiKey } from '../bearer-auth.ts';
import { ApiError } from '../errors.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { missingKeyVariable } from '../../providers/provider-keys.ts';
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
    const adapter = services.providers.get(plan.model.provider);
    if (!adapter) throw new ApiError(500, 'INTERNAL_ERROR', `provider ${plan.model.provider} is not configured`);
    // Before anything is reserved: a provider without its key cannot serve, and the client is not
    // told which variable is missing (that is the operator's business, so it goes to the log).
    const missingKey = missingKeyVariable(services.config, plan.model.provider);
    if (missingKey) {
      request.log.warn({ provider: plan.model.provider, model: plan.model.id, variable: missingKey }, `refused a chat: provider ${plan.model.provider} has no API key; set ${missingKey} and restart`);
      throw new ApiError(503, 'PROVIDER_NOT_CONFIGURED', `model ${plan.model.id} is not available on this gateway right now; nothing was charged. Use another model from GET /v1/models, or ask the operator (quote request id ${request.id})`);
    }

    const leaseMs = services.config.chat.reservationLeaseSeconds * 1000;
    const reserved = await reserve(services.storage, { wallet: key.wallet, apiKeyId: key.id, requestId: request.id, amountUsdc: plan.reservationUsdc, leaseMs });
    if (!reserved) {
      const balance = await getBalance(services.storage.db, key.wallet);
      throw new ApiError(
        402,
        'INSUFFICIENT_BALANCE',
        `available balance ${balance.available_usdc} micro-USDC cannot cover this request's reserved cost of ${plan.reservationUsdc}; top up with POST /v1/topup, or lower max_tokens`,
        { balance_usdc: balance.balance_usdc, available_usdc: balance.available_usdc, required_usdc: plan.reservationUsdc },
      );
    }

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
