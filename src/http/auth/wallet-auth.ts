import type { FastifyRequest } from 'fastify';
import type { Services } from '../../services.ts';
import { bearerToken, requireApiKey } from './bearer-auth.ts';
import { ApiError, badRequest, unauthorized } from '../../refusal.ts';
import { hasProof, requireSiwe, type SiweGrant, type SiweProofInput } from './siwe-proof.ts';
import { SESSION_OPERATIONS, signFor, type Operation } from '../../siwe/actions.ts';
import { ADDRESS_PATTERN } from '../../chain/address.ts';
import { authFailureLimit } from './auth-failure-limit.ts';
import { findLiveSession, SESSION_PATTERN } from '../../sessions/store.ts';

/**
 * Authorises a read of `:wallet` data: an API key of that wallet, a dashboard session of that
 * wallet (both in Authorization: Bearer), or a SIWE proof signed by that wallet (in the query
 * string). Anything else is 401 (403 for a live session of another wallet), so one wallet never
 * reads another's data. Returns the lowercase wallet address.
 */
export async function requireWalletOwner(services: Services, request: FastifyRequest<{ Params: { wallet: string } }>): Promise<string> {
  const raw = request.params.wallet;
  if (!ADDRESS_PATTERN.test(raw)) throw badRequest(`"${raw.slice(0, 64)}" is not a wallet address (0x followed by 40 hex digits)`);
  const wallet = raw.toLowerCase();
  const query = (request.query ?? {}) as Record<string, unknown>;

  if (request.headers.authorization !== undefined) {
    const session = sessionToken(request);
    if (session !== null) {
      if ((await requireSession(services, request, session)) !== wallet) {
        throw new ApiError(403, 'FORBIDDEN', 'this session belongs to another wallet; sign in with the wallet whose data you want to see');
      }
      return wallet;
    }
    const key = await requireApiKey(services, request);
    if (key.wallet !== wallet) throw unauthorized('this API key belongs to another wallet');
    return wallet;
  }
  if (query.message !== undefined || query.signature !== undefined) {
    const { wallet: signer } = await requireSiwe(services, request, query, 'read');
    if (signer !== wallet) throw unauthorized('the SIWE proof is signed by another wallet');
    return wallet;
  }
  throw unauthorized(
    'send an API key of this wallet ("Authorization: Bearer sk-…"), a dashboard session ("Authorization: Bearer ses-…") or a SIWE proof (message and signature query parameters)',
  );
}

/**
 * Authorises key management for `operation`: a SIWE proof made for it (per request), or a dashboard
 * session when the operation is one a session may do (read, list, revoke, tighten: never create or
 * loosen, which would turn a stolen tab into a lasting credential; 403 says which proof to sign).
 * An API key never manages keys: whoever holds a leaked key must not be able to mint more or
 * revoke the owner's. A request that carries a proof is decided by the proof alone (clients that
 * set a key or a session as a default header keep working). Returns the wallet and what the
 * credential permits beyond `operation` (a PATCH asks whether it may loosen).
 */
export async function requireKeyManager(services: Services, request: FastifyRequest, proof: SiweProofInput, operation: Operation): Promise<SiweGrant> {
  if (hasProof(proof)) return requireSiwe(services, request, proof, operation);
  const session = sessionToken(request);
  if (session !== null) {
    const wallet = await requireSession(services, request, session);
    if (!SESSION_OPERATIONS.includes(operation)) {
      throw new ApiError(
        403,
        'FORBIDDEN',
        `a dashboard session cannot do this: ${signFor(operation, services.config.dashboard.sessionMinutes)}, and send it as message and signature`,
      );
    }
    return { wallet, permits: SESSION_OPERATIONS };
  }
  if (request.headers.authorization !== undefined) {
    throw unauthorized(
      'an API key cannot manage keys; sign in with the wallet: a SIWE proof (message and signature) or a dashboard session (POST /v1/auth/session)',
    );
  }
  return requireSiwe(services, request, proof, operation);
}

/** The `ses-…` token in Authorization: Bearer, or null when the header holds anything else. */
export function sessionToken(request: FastifyRequest): string | null {
  const token = bearerToken(request.headers.authorization);
  return token?.startsWith('ses-') ? token : null;
}

/**
 * The wallet of a live dashboard session, or 401 (counted by the auth failure limit, like a bad
 * key). Looked up on every call, never cached: a revoked or expired session stops at once.
 */
export function requireSession(services: Services, request: FastifyRequest, token: string): Promise<string> {
  return authFailureLimit(services).guard(request, async () => {
    const invalid = unauthorized('the dashboard session is invalid, expired or revoked; sign in again (POST /v1/auth/session with a SIWE proof)');
    if (!SESSION_PATTERN.test(token)) throw invalid;
    const session = await findLiveSession(services.storage.db, services.keySecret, token, services.now());
    if (!session) throw invalid;
    return session.wallet;
  });
}
