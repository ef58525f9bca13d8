import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { hashKey } from '../keys/api-keys.ts';
import type { Database } from '../storage/schema.ts';

/**
 * Dashboard sessions: one SIWE signature opens a short-lived bearer token, so the page does not ask
 * the wallet for a signature per click. Like API keys, only a keyed hash is stored. A session is
 * never renewed (it ends at expires_at whatever happens) and is looked up on every use, so a
 * revocation holds on every instance at once.
 */

/** `ses-` + 43 base64url characters: 256 bits of randomness. Distinct from API keys (`sk-`). */
export const SESSION_PATTERN = /^ses-[A-Za-z0-9_-]{43}$/;

export interface OpenedSession {
  token: string;
  wallet: string;
  expiresAt: number;
}

export async function openSession(db: Kysely<Database>, secret: Buffer, wallet: string, lifetimeMs: number, now: number): Promise<OpenedSession> {
  const token = `ses-${randomBytes(32).toString('base64url')}`;
  const expiresAt = now + lifetimeMs;
  await db
    .insertInto('dashboard_sessions')
    .values({ token_hash: hashKey(secret, token), wallet, created_at: now, expires_at: expiresAt, revoked_at: null })
    .execute();
  return { token, wallet, expiresAt };
}

/** The wallet of a live session (not expired, not revoked), or null. */
export async function findLiveSession(db: Kysely<Database>, secret: Buffer, token: string, now: number): Promise<{ wallet: string; expiresAt: number } | null> {
  const row = await db
    .selectFrom('dashboard_sessions')
    .select(['wallet', 'expires_at'])
    .where('token_hash', '=', hashKey(secret, token))
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return row ? { wallet: row.wallet, expiresAt: Number(row.expires_at) } : null;
}

/** Ends a session now; false when it was not live (unknown, expired or already revoked). */
export async function revokeSession(db: Kysely<Database>, secret: Buffer, token: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('dashboard_sessions')
    .set({ revoked_at: now })
    .where('token_hash', '=', hashKey(secret, token))
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/**
 * Ends every live session of `wallet` now (the dashboard's "sign out everywhere"): a session token
 * read off a shared screen or a leaked log line would otherwise live until its expiry, since its
 * owner does not hold it to end it. Returns how many were live.
 */
export async function revokeWalletSessions(db: Kysely<Database>, wallet: string, now: number): Promise<number> {
  const result = await db
    .updateTable('dashboard_sessions')
    .set({ revoked_at: now })
    .where('wallet', '=', wallet)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** Sessions that ended can never be used again; their rows go (run beside the nonce pruning). */
export async function pruneSessions(db: Kysely<Database>, now = Date.now()): Promise<number> {
  const result = await db.deleteFrom('dashboard_sessions').where('expires_at', '<', now).executeTakeFirst();
  return Number(result.numDeletedRows ?? 0);
}
