import { bucketOf, periodResetsAt, type SpendPeriod } from './spend-periods.ts';
import type { UnitTx } from '../storage/write-units.ts';

/**
 * A key's spend limit and its count in the current period, read in the unit that reserves or
 * late-charges, with the key's wallet locked: every writer of the buckets holds that lock (see
 * effects/key-spend.ts), so what is read here is current.
 */

const READ_LIMIT = 'SELECT spend_limit_usdc, spend_limit_period FROM api_keys WHERE id = ?';
const READ_BUCKET = 'SELECT spent_usdc, locked_usdc FROM key_spend WHERE api_key_id = ? AND period = ?';

export interface KeyLimitReached {
  limitUsdc: number;
  period: SpendPeriod;
  /** Charged in the current period. */
  spentUsdc: number;
  /** Reserved by this key's requests still running. */
  lockedUsdc: number;
  /** Epoch ms when the period's count starts again at 0; null for a `total` limit. */
  resetsAt: number | null;
}

/** A key's limit and its count in the bucket of its period that holds `at`. */
export type KeyLimitCount = Omit<KeyLimitReached, 'resetsAt'>;

/**
 * The key's limit and how much of it the period holding `at` has used, or null when the key has no
 * limit. Call it with the key's wallet locked (see above); the limit is read here, in the same
 * unit, so a change made a moment ago applies at once on every instance.
 */
export async function keyLimitCount(tx: UnitTx, apiKeyId: number, at: number): Promise<KeyLimitCount | null> {
  const key = await tx.get<{ spend_limit_usdc: number | null; spend_limit_period: SpendPeriod | null }>(READ_LIMIT, [apiKeyId]);
  if (!key || key.spend_limit_usdc === null) return null;
  const period = key.spend_limit_period ?? 'total';
  const bucket = await tx.get<{ spent_usdc: number; locked_usdc: number }>(READ_BUCKET, [apiKeyId, bucketOf(period, at)]);
  return { limitUsdc: Number(key.spend_limit_usdc), period, spentUsdc: Number(bucket?.spent_usdc ?? 0), lockedUsdc: Number(bucket?.locked_usdc ?? 0) };
}

/** What the limit still admits in its period: never negative (a limit lowered below the spend has none). */
export const roomLeft = (c: KeyLimitCount): number => Math.max(0, c.limitUsdc - c.spentUsdc - c.lockedUsdc);

/**
 * Whether the key's limit leaves room for `amountUsdc` more in its current period, counting the
 * requests in flight: the refusal when it does not, `limited` saying whether the key has a limit.
 */
export async function checkKeyLimit(
  tx: UnitTx,
  apiKeyId: number,
  amountUsdc: number,
  now: number,
): Promise<{ limited: boolean; refusal: KeyLimitReached | null }> {
  const count = await keyLimitCount(tx, apiKeyId, now);
  if (!count) return { limited: false, refusal: null };
  if (amountUsdc <= roomLeft(count)) return { limited: true, refusal: null };
  return { limited: true, refusal: { ...count, resetsAt: periodResetsAt(count.period, now) } };
}
