import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import { DAY_MS } from './days.ts';
import { bucketOf, dayBucketOfDayNumber } from './spend-periods.ts';

export interface KeySpendRow {
  api_key_id: number;
  period: string;
  spent_usdc: number;
  locked_usdc: number;
}

/**
 * What `key_spend` must hold, recomputed from the source of truth: per key and bucket, the amounts
 * of its pending reservations (locked) and the charges of its request_usage rows (spent), each
 * counted in the buckets of its reservation time. Grouped by UTC day in SQL, rolled up into
 * months and totals here. Reads every reservation: for the audit and the migration only.
 */
export async function expectedKeySpend(db: Kysely<any>): Promise<KeySpendRow[]> {
  const days = await (db as Kysely<Database>)
    .selectFrom('reservations as r')
    .leftJoin('request_usage as u', 'u.request_id', 'r.request_id')
    .select([
      'r.api_key_id',
      sql<number>`r.created_at / ${sql.lit(DAY_MS)}`.as('day'),
      sql<number>`coalesce(sum(case when r.status = 'pending' then r.amount_usdc else 0 end), 0)`.as('locked'),
      sql<number>`coalesce(sum(u.charged_usdc), 0)`.as('spent'),
    ])
    .where('r.api_key_id', 'is not', null)
    .groupBy(['r.api_key_id', sql`r.created_at / ${sql.lit(DAY_MS)}`])
    .execute();
  const sums = new Map<string, KeySpendRow>();
  const add = (apiKeyId: number, period: string, spent: number, locked: number) => {
    const id = `${apiKeyId} ${period}`;
    const row = sums.get(id) ?? { api_key_id: apiKeyId, period, spent_usdc: 0, locked_usdc: 0 };
    row.spent_usdc += spent;
    row.locked_usdc += locked;
    sums.set(id, row);
  };
  // The spend of finished reservations retention removed, counted in their reservation day's buckets.
  const retired = await retiredKeySpend(db);
  for (const d of [...days, ...retired]) {
    const key = Number(d.api_key_id);
    const day = Number(d.day);
    const spent = Number(d.spent);
    const locked = Number(d.locked);
    add(key, 'total', spent, locked);
    add(key, dayBucketOfDayNumber(day), spent, locked);
    add(key, bucketOf('month', day * DAY_MS), spent, locked);
  }
  return [...sums.values()];
}

async function retiredKeySpend(db: Kysely<any>): Promise<{ api_key_id: number; day: number; spent: number; locked: number }[]> {
  const rows = await (db as Kysely<Database>).selectFrom('retired_key_spend').select(['api_key_id', 'day', 'spent_usdc']).execute();
  return rows.map((r) => ({ api_key_id: Number(r.api_key_id), day: Number(r.day), spent: Number(r.spent_usdc), locked: 0 }));
}

/**
 * `key_spend` against expectedKeySpend: one problem line per bucket that disagrees (a bucket
 * missing on either side counts as zero). For checkLedger.
 */
export async function keySpendProblems(db: Kysely<Database>): Promise<string[]> {
  const expected = new Map((await expectedKeySpend(db)).map((r) => [`${r.api_key_id} ${r.period}`, r]));
  const kept = await db.selectFrom('key_spend').selectAll().execute();
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const k of kept) {
    const id = `${k.api_key_id} ${k.period}`;
    seen.add(id);
    const e = expected.get(id);
    const [spent, locked] = [Number(k.spent_usdc), Number(k.locked_usdc)];
    if (spent !== (e?.spent_usdc ?? 0) || locked !== (e?.locked_usdc ?? 0)) {
      problems.push(
        `api key #${k.api_key_id} ${k.period}: key spend ${spent} (locked ${locked}) != usage rows ${e?.spent_usdc ?? 0} (pending ${e?.locked_usdc ?? 0})`,
      );
    }
  }
  for (const [id, e] of expected) {
    if (!seen.has(id) && (e.spent_usdc !== 0 || e.locked_usdc !== 0)) {
      problems.push(`api key #${e.api_key_id} ${e.period}: no key spend kept, usage rows say ${e.spent_usdc} (pending ${e.locked_usdc})`);
    }
  }
  return problems;
}
