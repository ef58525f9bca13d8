import { DAY_MS } from './days.ts';

/**
 * The periods a key's spend is counted in. Every reservation of a key is counted in three buckets at
 * once, named by its reservation time (UTC): `total`, `day:YYYY-MM-DD` and `month:YYYY-MM`. Keeping
 * all three whatever limit the key has means a limit set or changed later sees the spend already
 * made in its period, with no back-fill and no race with requests in flight. A reservation stays in
 * the buckets of the moment it was made: one reserved at 23:59:59 and settled after midnight is
 * charged to the day it was reserved in (that day's limit admitted it), and the new day starts at 0.
 */
export type SpendPeriod = 'total' | 'day' | 'month';
export const SPEND_PERIODS: readonly SpendPeriod[] = ['total', 'day', 'month'];

/** The bucket of `period` that the instant `ms` falls in. */
export function bucketOf(period: SpendPeriod, ms: number): string {
  const iso = new Date(ms).toISOString();
  if (period === 'day') return `day:${iso.slice(0, 10)}`;
  if (period === 'month') return `month:${iso.slice(0, 7)}`;
  return 'total';
}

// The buckets of the last UTC day asked for: every reservation names its three buckets, and
// formatting two ISO dates per reservation was 1% of the gateway's CPU at saturation (bench profile).
let lastDay = { day: Number.NaN, buckets: ['total', '', ''] as [string, string, string] };

/** The three buckets a reservation made at `ms` is counted in. */
export function bucketsAt(ms: number): [string, string, string] {
  const day = Math.floor(ms / DAY_MS);
  if (day !== lastDay.day) lastDay = { day, buckets: [bucketOf('total', ms), bucketOf('day', ms), bucketOf('month', ms)] };
  return [...lastDay.buckets];
}

/** When the period containing `ms` ends (its counter starts again at 0), or null for `total`. */
export function periodResetsAt(period: SpendPeriod, ms: number): number | null {
  if (period === 'total') return null;
  if (period === 'day') return Math.floor(ms / DAY_MS) * DAY_MS + DAY_MS;
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
}

/** The day bucket of a whole UTC day number (ms / 86,400,000), for audits that group in SQL. */
export function dayBucketOfDayNumber(day: number): string {
  return bucketOf('day', day * DAY_MS);
}

/**
 * PostgreSQL expressions naming the day and month buckets of an epoch-millisecond column, equal to
 * bucketOf() (used where the reservation time is only known inside one statement).
 */
export function pgBucketExpressions(createdAtColumn: string): { day: string; month: string } {
  const utc = `(to_timestamp(${createdAtColumn} / 1000) AT TIME ZONE 'UTC')`;
  return { day: `'day:' || to_char(${utc}, 'YYYY-MM-DD')`, month: `'month:' || to_char(${utc}, 'YYYY-MM')` };
}
