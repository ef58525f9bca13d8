import { bucketOf, bucketsAt, periodResetsAt, type SpendPeriod } from '../keys/spend-periods.ts';
import type { UnitTx } from '../storage/write-units.ts';

/**
 * A key's spend per period bucket, moved in the same unit as its wallet's money (see
 * src/keys/spend-periods.ts for the buckets). The rule that makes the limit exact under
 * concurrency: every writer of a key's buckets holds the row lock of the key's wallet (reserve
 * locks the wallet first, finish and sweep lock it with the reservation), so a read of a bucket
 * made after taking that lock is current. Order is always wallet, then buckets: no deadlock.
 */

/** Counts a new reservation in its three buckets (creating them at the first request of a period). */
export const COUNT_RESERVATION = `INSERT INTO key_spend (api_key_id, period, spent_usdc, locked_usdc)
  VALUES (?, ?, 0, ?), (?, ?, 0, ?), (?, ?, 0, ?)
  ON CONFLICT (api_key_id, period) DO UPDATE SET locked_usdc = key_spend.locked_usdc + excluded.locked_usdc`;

export function countReservationParams(apiKeyId: number, amountUsdc: number, reservedAt: number): unknown[] {
  return bucketsAt(reservedAt).flatMap((bucket) => [apiKeyId, bucket, amountUsdc]);
}

/**
 * Finishes a reservation in its buckets: `charged` becomes spend, `released` leaves the locked
 * amount (a settle passes both, the sweeper only the release, a late charge only the charge).
 */
export const FINISH_IN_BUCKETS = 'UPDATE key_spend SET spent_usdc = spent_usdc + ?, locked_usdc = locked_usdc - ? WHERE api_key_id = ? AND period IN (?, ?, ?)';

export function finishInBucketsParams(chargedUsdc: number, releasedUsdc: number, apiKeyId: number, reservedAt: number): unknown[] {
  return [chargedUsdc, releasedUsdc, apiKeyId, ...bucketsAt(reservedAt)];
}

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
export async function checkKeyLimit(tx: UnitTx, apiKeyId: number, amountUsdc: number, now: number): Promise<{ limited: boolean; refusal: KeyLimitReached | null }> {
  const count = await keyLimitCount(tx, apiKeyId, now);
  if (!count) return { limited: false, refusal: null };
  if (amountUsdc <= roomLeft(count)) return { limited: true, refusal: null };
  return { limited: true, refusal: { ...count, resetsAt: periodResetsAt(count.period, now) } };
}
