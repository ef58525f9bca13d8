import { createHmac, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/** `sk-` + 43 base64url characters: 256 bits of randomness. */
export const KEY_PATTERN = /^sk-[A-Za-z0-9_-]{43}$/;

export interface IssuedKey {
  key: string;
  hash: string;
  prefix: string;
  last4: string;
}

export function hashKey(secret: Buffer, key: string): string {
  return createHmac('sha256', secret).update(key).digest('hex');
}

export function generateKey(secret: Buffer): IssuedKey {
  const key = `sk-${randomBytes(32).toString('base64url')}`;
  return { key, hash: hashKey(secret, key), prefix: key.slice(0, 7), last4: key.slice(-4) };
}

export interface KeyRow {
  id: number;
  wallet: string;
  label: string;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
  prefix: string;
  last4: string;
}

export async function insertKey(db: Kysely<Database>, wallet: string, issued: IssuedKey, label: string, now = Date.now()): Promise<KeyRow> {
  const row = await db
    .insertInto('api_keys')
    .values({ wallet, key_hash: issued.hash, prefix: issued.prefix, last4: issued.last4, label, created_at: now, revoked_at: null, last_used_at: null })
    .returning(['id', 'wallet', 'label', 'created_at', 'revoked_at', 'last_used_at', 'prefix', 'last4'])
    .executeTakeFirstOrThrow();
  return { ...row, id: Number(row.id) };
}

export async function countActiveKeys(db: Kysely<Database>, wallet: string): Promise<number> {
  const row = await db
    .selectFrom('api_keys')
    .select(sql<number>`count(*)`.as('n'))
    .where('wallet', '=', wallet)
    .where('revoked_at', 'is', null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function listKeys(db: Kysely<Database>, wallet: string): Promise<KeyRow[]> {
  const rows = await db
    .selectFrom('api_keys')
    .select(['id', 'wallet', 'label', 'created_at', 'revoked_at', 'last_used_at', 'prefix', 'last4'])
    .where('wallet', '=', wallet)
    .orderBy('id')
    .execute();
  return rows.map((r) => ({ ...r, id: Number(r.id) }));
}

/** The active key with this hash, or undefined (unknown or revoked). */
export async function findActiveKey(db: Kysely<Database>, hash: string): Promise<KeyRow | undefined> {
  const row = await db
    .selectFrom('api_keys')
    .select(['id', 'wallet', 'label', 'created_at', 'revoked_at', 'last_used_at', 'prefix', 'last4'])
    .where('key_hash', '=', hash)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return row ? { ...row, id: Number(row.id) } : undefined;
}

export type RevokeOutcome = 'revoked' | 'already_revoked' | 'not_found';

/** Revokes a key of this wallet. Another wallet's key is indistinguishable from an unknown one. */
export async function revokeKey(db: Kysely<Database>, wallet: string, id: number, now = Date.now()): Promise<RevokeOutcome> {
  const result = await db
    .updateTable('api_keys')
    .set({ revoked_at: now })
    .where('id', '=', id)
    .where('wallet', '=', wallet)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 1) return 'revoked';
  const exists = await db.selectFrom('api_keys').select('id').where('id', '=', id).where('wallet', '=', wallet).executeTakeFirst();
  return exists ? 'already_revoked' : 'not_found';
}

export function toIso(ms: number | null): string | null {
  return ms === null ? null : new Date(Number(ms)).toISOString();
}
