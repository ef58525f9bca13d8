import type { FastifyReply, FastifyRequest } from 'fastify';
import type { KeyRow } from '../../keys/api-keys.ts';
import type { Services } from '../../services.ts';
import { presentedKey, requireKeyStillActive, requirePresentedKey } from './bearer-auth.ts';
import { clientBucket } from '../client-bucket.ts';
import { enforceRateLimit } from '../rate-limit.ts';

/** The hash of the key each paid-for request (chat, embeddings) was authenticated with, before its body was read. */
const keyOf = new WeakMap<FastifyRequest, string>();

/**
 * The onRequest hook of every endpoint that spends a wallet's balance. The key and the wallet's rate
 * limit are checked on the headers alone (onRequest runs before the body is read): an anonymous or
 * rate-limited client gets its 401 or 429 without the gateway reading, let alone parsing, up to
 * limits.chatBodyBytes of JSON. With pay-per-request on, a request with no Authorization header at
 * all goes on to be priced and paid (pay-per-request.ts), limited by its address meanwhile.
 * `apiKeyHeader`: a protocol's own key header besides Authorization (Anthropic's x-api-key).
 * `payable`: false for an endpoint no payment can buy (count_tokens), whose request with no key is
 * only ever its 401: refused here, with pay-per-request on too, before its body is read.
 * `admit`: a refusal of the endpoint's own decided on the headers, after the key and before the
 * wallet's window counts the request (count_tokens' counting budget): what it refuses uses no slot.
 */
export const authenticateSpender =
  (services: Services, apiKeyHeader?: string, payable = true, admit?: (request: FastifyRequest, key: KeyRow) => void) =>
  async (request: FastifyRequest, reply: FastifyReply) => {
    const authorization = presentedKey(request, apiKeyHeader);
    if (payable && services.config.payPerRequest.enabled && authorization === undefined) {
      await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
      return;
    }
    const key = await requirePresentedKey(services, request, authorization);
    admit?.(request, key.row);
    await enforceRateLimit(services, reply, `chat:${key.row.wallet}`, services.rateWindows.chat);
    keyOf.set(request, key.hash);
  };

/**
 * The key authenticateSpender found, looked up again now that the body is in; undefined for a
 * pay-per-request request. The body may arrive up to server.requestTimeoutSeconds after the
 * headers: a key revoked or expired meanwhile is 401 here, before anything is reserved, or a
 * leaked key's holder could send the headers of many requests and finish them after the revoke.
 */
export const spenderKey = async (services: Services, request: FastifyRequest): Promise<KeyRow | undefined> => {
  const hash = keyOf.get(request);
  return hash === undefined ? undefined : requireKeyStillActive(services, request, hash);
};
