import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyRow } from '../../keys/api-keys.ts';
import type { Services } from '../../services.ts';
import { presentedKey, requireApiKey } from './bearer-auth.ts';
import { clientBucket } from '../client-bucket.ts';
import { enforceRateLimit } from '../rate-limit.ts';

/** The key each paid-for request (chat, embeddings) was authenticated with, set before its body is read. */
const keyOf = new WeakMap<FastifyRequest, KeyRow>();

/**
 * The onRequest hook of every endpoint that spends a wallet's balance. The key and the wallet's rate
 * limit are checked on the headers alone (onRequest runs before the body is read): an anonymous or
 * rate-limited client gets its 401 or 429 without the gateway reading, let alone parsing, up to
 * limits.chatBodyBytes of JSON. With pay-per-request on, a request with no Authorization header at
 * all goes on to be priced and paid (pay-per-request.ts), limited by its address meanwhile.
 * `apiKeyHeader`: a protocol's own key header besides Authorization (Anthropic's x-api-key).
 */
export const authenticateSpender = (services: Services, apiKeyHeader?: string) => async (request: FastifyRequest, reply: FastifyReply) => {
  const authorization = presentedKey(request, apiKeyHeader);
  if (services.config.payPerRequest.enabled && authorization === undefined) {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    return;
  }
  const key = await requireApiKey(services, request, authorization);
  await enforceRateLimit(services, reply, `chat:${key.wallet}`, services.rateWindows.chat);
  keyOf.set(request, key);
};

/** The key authenticateSpender found; undefined for a pay-per-request request. */
export const spenderKey = (request: FastifyRequest): KeyRow | undefined => keyOf.get(request);
