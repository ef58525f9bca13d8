import type { FastifyRequest } from 'fastify';
import { hashKey, KEY_PATTERN, findActiveKey, toIso, type KeyRow } from '../../keys/api-keys.ts';
import type { Services } from '../../services.ts';
import { authFailureLimit } from './auth-failure-limit.ts';
import { unauthorized } from '../../refusal.ts';

/**
 * Reads `Authorization: Bearer sk-…` and returns the active key, or throws 401 (429 once the client
 * address has failed too often, see auth-failure-limit.ts). `authorization` replaces the header for
 * a route that also takes the key another way (Anthropic's x-api-key, see keyHeaderOf).
 */
export async function requireApiKey(services: Services, request: FastifyRequest, authorization = request.headers.authorization): Promise<KeyRow> {
  return (await requirePresentedKey(services, request, authorization)).row;
}

/** A key requireApiKey accepted, with the hash it was found by (to look it up again: requireKeyStillActive). */
export interface PresentedKey {
  row: KeyRow;
  hash: string;
}

/** requireApiKey, also returning the key's hash. */
export function requirePresentedKey(services: Services, request: FastifyRequest, authorization: string | undefined): Promise<PresentedKey> {
  return authFailureLimit(services).guard(
    request,
    () => lookUpKey(services, authorization),
    () => provenKey(services, authorization),
  );
}

/**
 * The key found by requirePresentedKey, looked up again later in the same request (through the
 * cache: a revocation on this instance shows at once, elsewhere within its TTL), or 401 now that it
 * is revoked or expired.
 */
export function requireKeyStillActive(services: Services, request: FastifyRequest, hash: string): Promise<KeyRow> {
  return authFailureLimit(services).guard(
    request,
    () => activeKey(services, hash),
    () => services.keyCache.proven(hash),
  );
}

/**
 * Whether the header holds a key this instance has found active (KeyCache.proven), which passes a
 * client address blocked for failed authentications: an HMAC and a memory lookup, no database read.
 */
function provenKey(services: Services, header: string | undefined): boolean {
  const key = bearerToken(header);
  return key !== null && KEY_PATTERN.test(key) && services.keyCache.proven(hashKey(services.keySecret, key));
}

/**
 * The key as an Authorization value: the Authorization header when sent, else `headerName` (such as
 * `x-api-key`, which carries the bare key) when the route takes one. Undefined: no key at all.
 */
export function presentedKey(request: FastifyRequest, headerName: string | undefined): string | undefined {
  if (request.headers.authorization !== undefined || !headerName) return request.headers.authorization;
  const value = request.headers[headerName];
  return typeof value === 'string' ? `Bearer ${value}` : undefined;
}

async function lookUpKey(services: Services, header: string | undefined): Promise<PresentedKey> {
  const key = bearerToken(header);
  if (!key) throw unauthorized('missing API key; send "Authorization: Bearer sk-…" (create a key with POST /v1/auth/keys)');
  // A dashboard session only manages keys and reads the wallet's data; it never spends.
  if (key.startsWith('ses-'))
    throw unauthorized(
      'a dashboard session cannot be used here; send an API key ("Authorization: Bearer sk-…", create one on the dashboard or with POST /v1/auth/keys)',
    );
  // A token that cannot be one of our keys is refused without a database round trip.
  if (!KEY_PATTERN.test(key)) throw unauthorized('invalid or revoked API key');
  const hash = hashKey(services.keySecret, key);
  const row = await activeKey(services, hash);
  touchLastUsed(services, row.id);
  return { row, hash };
}

/** The key with this hash, unless it is unknown, revoked (401) or expired (401 saying so). */
async function activeKey(services: Services, hash: string): Promise<KeyRow> {
  const row = await services.keyCache.lookup(hash, () => findActiveKey(services.storage.db, hash));
  if (!row) throw unauthorized('invalid or revoked API key');
  if (row.expires_at !== null && row.expires_at <= Date.now()) {
    throw unauthorized(
      `this API key expired at ${toIso(row.expires_at)}; the wallet owner can extend it (PATCH /v1/auth/keys/${row.id} with expires_at) or create a new key`,
    );
  }
  return row;
}

const lastTouched = new Map<number, number>();

/** Records `last_used_at` at most once a minute per key, off the request's path. */
function touchLastUsed(services: Services, id: number): void {
  const now = Date.now();
  if ((lastTouched.get(id) ?? 0) > now - 60_000) return;
  lastTouched.set(id, now);
  if (lastTouched.size > 100_000) lastTouched.clear();
  services.storage.db
    .updateTable('api_keys')
    .set({ last_used_at: now })
    .where('id', '=', id)
    .execute()
    .catch((err) => services.logger.warn({ err }, 'recording last_used_at failed'));
}

export function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m ? m[1]! : null;
}
