import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/**
 * Redeem codes are bearer credit: stored only as a SHA-256 hash (they carry 128 random bits, so an
 * unkeyed hash is enough), shown once when the operator creates them.
 * Referral codes are meant to be shared, so they are stored as they are.
 */
export const REDEEM_CODE_PATTERN = /^rc-[A-Za-z0-9_-]{22}$/;
export const REF_CODE_PATTERN = /^ref-[a-z0-9]{10}$/;

export function hashRedeemCode(code: string): string {
  return createHash('sha256').update(code).digest('hex');
}

export async function createRedeemCodes(db: Kysely<Database>, valueUsdc: number, count: number, now = Date.now()): Promise<string[]> {
  if (!Number.isSafeInteger(valueUsdc) || valueUsdc <= 0) throw new RangeError('redeem code value must be a positive whole number of micro-USDC');
  const codes = Array.from({ length: count }, () => `rc-${randomBytes(16).toString('base64url')}`);
  await db
    .insertInto('redeem_codes')
    .values(codes.map((c) => ({ code_hash: hashRedeemCode(c), value_usdc: valueUsdc, created_at: now, redeemed_by: null, redeemed_at: null })))
    .execute();
  return codes;
}

/**
 * Marks a code redeemed by this wallet. The conditional UPDATE is the single-use guarantee: of two
 * concurrent redemptions only one changes the row. Returns the code id and value, or null.
 */
export async function claimRedeemCode(
  trx: Kysely<Database>,
  code: string,
  wallet: string,
  now = Date.now(),
): Promise<{ id: number; valueUsdc: number } | null> {
  const hash = hashRedeemCode(code);
  const result = await trx
    .updateTable('redeem_codes')
    .set({ redeemed_by: wallet, redeemed_at: now })
    .where('code_hash', '=', hash)
    .where('redeemed_by', 'is', null)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) !== 1) return null;
  const row = await trx.selectFrom('redeem_codes').select(['id', 'value_usdc']).where('code_hash', '=', hash).executeTakeFirstOrThrow();
  return { id: Number(row.id), valueUsdc: Number(row.value_usdc) };
}

export async function createReferralCode(db: Kysely<Database>, wallet: string, now = Date.now()): Promise<string> {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = randomBytes(10);
  const code = `ref-${Array.from(bytes, (b) => alphabet[b % alphabet.length]).join('')}`;
  await db.insertInto('referral_codes').values({ code, wallet: wallet.toLowerCase(), created_at: now }).execute();
  return code;
}

export type AttributionOutcome = 'attributed' | 'already_attributed' | 'unknown_code' | 'self_referral';

/** Records who referred this wallet. The first attribution wins; later codes change nothing. */
export async function attributeReferral(trx: Kysely<Database>, wallet: string, code: string, now = Date.now()): Promise<AttributionOutcome> {
  const ref = await trx.selectFrom('referral_codes').select('wallet').where('code', '=', code).executeTakeFirst();
  if (!ref) return 'unknown_code';
  if (ref.wallet === wallet) return 'self_referral';
  const result = await trx
    .insertInto('referral_attributions')
    .values({ wallet, referrer: ref.wallet, code, created_at: now })
    .onConflict((oc) => oc.column('wallet').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1 ? 'attributed' : 'already_attributed';
}
