import { bucketsAt, pgBucketExpressions } from '../spend-periods.ts';
import { param, type Operands } from './statement.ts';

/**
 * A key's spend per period bucket (see ../spend-periods.ts), moved in the same unit as its
 * wallet's money. The rule that makes the limit exact under concurrency: every writer of a key's
 * buckets holds the row lock of the key's wallet (reserve locks the wallet first, finish and sweep
 * lock it with the reservation), so a read of a bucket made after taking that lock is current
 * (../key-spend-limit.ts reads it). Order is always wallet, then buckets: no deadlock.
 */

/** A reservation's three buckets (`total`, its day, its month), as SQL values. */
export type Buckets = Operands<'total' | 'day' | 'month'>;

/** A write unit's buckets: bound parameters, valued by bucketValues. */
export const BOUND_BUCKETS: Buckets = { total: param('totalBucket'), day: param('dayBucket'), month: param('monthBucket') };

/** The values of BOUND_BUCKETS for a reservation made at `reservedAt`. */
export function bucketValues(reservedAt: number): { totalBucket: string; dayBucket: string; monthBucket: string } {
  const [totalBucket, dayBucket, monthBucket] = bucketsAt(reservedAt);
  return { totalBucket, dayBucket, monthBucket };
}

/** The buckets of a reservation whose time is the column `reservedAt`, inside one PostgreSQL statement. */
export function bucketsOfColumn(reservedAt: string): Buckets {
  const { day, month } = pgBucketExpressions(reservedAt);
  return { total: "'total'", day, month };
}

export type Counting = Operands<'apiKeyId' | 'amount'>;

const ADD_LOCKED = 'ON CONFLICT (api_key_id, period) DO UPDATE SET locked_usdc = key_spend.locked_usdc + excluded.locked_usdc';

/**
 * Counts a new reservation in its three buckets (creating them at the first request of a period).
 * `from`: the one-statement reserve's row source (the wallet it locked); a unit writes the values.
 */
export function countReservation(v: Counting, b: Buckets, from?: string): string {
  const rows = from
    ? `SELECT ${v.apiKeyId}, b.period, 0, ${v.amount} FROM ${from}, (VALUES (${b.total}), (${b.day}), (${b.month})) AS b(period)`
    : `VALUES ${[b.total, b.day, b.month].map((bucket) => `(${v.apiKeyId}, ${bucket}, 0, ${v.amount})`).join(', ')}`;
  return `INSERT INTO key_spend (api_key_id, period, spent_usdc, locked_usdc)
  ${rows}
  ${ADD_LOCKED}`;
}

export type BucketFinish = Operands<'charged' | 'released' | 'apiKeyId'>;

/**
 * Finishes a reservation in its buckets: `charged` becomes spend, `released` leaves the locked
 * amount (a settle passes both, the sweeper only the release, a late charge only the charge).
 * `from`: what the finish statement reads its values from.
 */
export const finishInBuckets = (v: BucketFinish, b: Buckets, from = ''): string =>
  `UPDATE key_spend SET spent_usdc = spent_usdc + ${v.charged}, locked_usdc = locked_usdc - ${v.released}${from} WHERE api_key_id = ${v.apiKeyId} AND period IN (${b.total}, ${b.day}, ${b.month})`;
