import { createHmac, randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { ApiKeyTable, Database } from '../storage/schema.ts';
import { limitColumns, limitsFromColumns } from './key-limits.ts';
import { NO_LIMITS, type KeyLimits } from './limits.ts';

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

export interface KeyRow extends KeyLimits {
  id: number;
  wallet: string;
  label: string;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
  prefix: string;
  last4: string;
}

/** Every column a KeyRow is read from (never the hash). */
export const KEY_COLUMNS = [
  'id',
  'wallet',
  'label',
  'created_at',
  'revoked_at',
  'last_used_at',
  'prefix',
  'last4',
  'spend_limit_usdc',
  'spend_limit_period',
  'allowed_models',
  'expires_at',
] as const;

type StoredKey = Omit<Pick<ApiKeyTable, (typeof KEY_COLUMNS)[number]>, 'id'> & { id: number };

export function toKeyRow(r: StoredKey): KeyRow {
  return {
    id: Number(r.id),
    wallet: r.wallet,
    label: r.label,
    created_at: Number(r.created_at),
    revoked_at: r.revoked_at === null ? null : Number(r.revoked_at),
    last_used_at: r.last_used_at === null ? null : Number(r.last_used_at),
    prefix: r.prefix,
    last4: r.last4,
    ...limitsFromColumns(r),
  };
}

export async function insertKey(
  db: Kysely<Database>,
  wallet: string,
  issued: IssuedKey,
  label: string,
  limits: KeyLimits = NO_LIMITS,
  now = Date.now(),
): Promise<KeyRow> {
  const row = await db
    .insertInto('api_keys')
    .values({
      wallet,
      key_hash: issued.hash,
      prefix: issued.prefix,
      last4: issued.last4,
      label,
      created_at: now,
      revoked_at: null,
      last_used_at: null,
      ...limitColumns(limits),
    })
    .returning(KEY_COLUMNS)
    .executeTakeFirstOrThrow();
  return toKeyRow(row);
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
  const rows = await db.selectFrom('api_keys').select(KEY_COLUMNS).where('wallet', '=', wallet).orderBy('id').execute();
  return rows.map(toKeyRow);
}

/** The active key with this hash, or undefined (unknown or revoked). An expired key is returned: the caller says why it is refused. */
export async function findActiveKey(db: Kysely<Database>, hash: string): Promise<KeyRow | undefined> {
  const row = await db.selectFrom('api_keys').select(KEY_COLUMNS).where('key_hash', '=', hash).where('revoked_at', 'is', null).executeTakeFirst();
  return row ? toKeyRow(row) : undefined;
}

/** Any key by id (revoked ones too), for the operator. */
export async function findKeyById(db: Kysely<Database>, id: number): Promise<KeyRow | undefined> {
  const row = await db.selectFrom('api_keys').select(KEY_COLUMNS).where('id', '=', id).executeTakeFirst();
  return row ? toKeyRow(row) : undefined;
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
