import type { Kysely } from 'kysely';
import { DAY_MS, usageDay } from '../ledger/days.ts';
import type { Database } from '../storage/schema.ts';
import type { DailyUsage } from './daily-usage.ts';

export type { DailyUsage };

/**
 * The wallet's usage per UTC day and key over the last `days` days (today included), from the
 * running daily totals: one range of usage_daily's primary key, at most days × keys rows, however
 * many requests the wallet made. Days without requests have no row.
 */
export async function dailyUsage(db: Kysely<Database>, wallet: string, days: number, now: number): Promise<{ from: string; to: string; rows: DailyUsage[] }> {
  const today = usageDay(now);
  const first = today - days + 1;
  const rows = await db
    .selectFrom('usage_daily')
    .selectAll()
    .where('wallet', '=', wallet)
    .where('day', '>=', first)
    .where('day', '<=', today)
    .orderBy('day')
    .orderBy('api_key_id')
    .execute();
  return {
    from: isoDay(first),
    to: isoDay(today),
    rows: rows.map((r) => ({
      date: isoDay(Number(r.day)),
      api_key_id: Number(r.api_key_id),
      requests: Number(r.request_count),
      prompt_tokens: Number(r.prompt_tokens),
      completion_tokens: Number(r.completion_tokens),
      charged_usdc: Number(r.charged_usdc),
    })),
  };
}

const isoDay = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);
