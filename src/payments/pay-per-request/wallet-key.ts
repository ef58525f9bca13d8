import type { Kysely } from 'kysely';
import { KEY_COLUMNS, toKeyRow, type KeyRow } from '../../keys/api-keys.ts';
import { isUniqueViolation } from '../../storage/constraint-errors.ts';
import type { Database } from '../../storage/schema.ts';

export const PAY_PER_REQUEST_LABEL = 'x402 pay-per-request';

/**
 * Usage has to belong to a key (request_usage and usage_totals are per key, and GET
 * /v1/usage/:wallet lists a wallet's keys), so each wallet that pays per request gets one
 * pseudo key that carries those requests. Its stored hash is not an HMAC digest (real ones are 64
 * hex digits), so no bearer token can ever match it: it attributes usage and grants nothing.
 */
const pseudoHash = (wallet: string) => `pay-per-request:${wallet}`;

/** The wallet's pay-per-request pseudo key, created on its first paid request. */
export async function payPerRequestKey(db: Kysely<Database>, wallet: string, now = Date.now()): Promise<KeyRow> {
  const existing = await find(db, wallet);
  if (existing) return existing;
  try {
    await db
      .insertInto('api_keys')
      .values({
        wallet,
        key_hash: pseudoHash(wallet),
        prefix: 'x402',
        last4: '',
        label: PAY_PER_REQUEST_LABEL,
        created_at: now,
        revoked_at: null,
        last_used_at: null,
      })
      .execute();
  } catch (err) {
    // Two first paid requests of one wallet at once: the other one created it.
    if (!isUniqueViolation(err)) throw err;
  }
  const row = await find(db, wallet);
  if (!row) throw new Error('the pay-per-request key vanished right after it was created');
  return row;
}

async function find(db: Kysely<Database>, wallet: string): Promise<KeyRow | undefined> {
  // Revoked or not: revoking it in the key list must not lose the usage of later paid requests.
  const row = await db.selectFrom('api_keys').select(KEY_COLUMNS).where('key_hash', '=', pseudoHash(wallet)).executeTakeFirst();
  return row ? toKeyRow(row) : undefined;
}
