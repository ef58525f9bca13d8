import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

const COLUMNS = ['request_count', 'prompt_tokens', 'completion_tokens', 'charged_usdc'] as const;

/**
 * The daily totals (what GET /v1/usage/:wallet/daily reports) must equal request_usage summed per
 * wallet, UTC day and key: a finish that wrote a usage row without adding it to its day, or to the
 * wrong day or wallet, shows here. One problem line per (wallet, day, key) that disagrees, for
 * checkLedger. Reads all of request_usage: this is the audit, not the hot path.
 */
export async function usageDailyProblems(db: Kysely<Database>): Promise<string[]> {
  const fromRows = await db
    .selectFrom('request_usage')
    .select([
      'wallet',
      sql<number>`created_at / 86400000`.as('day'),
      'api_key_id',
      sql<number>`count(*)`.as('request_count'),
      sql<number>`sum(prompt_tokens)`.as('prompt_tokens'),
      sql<number>`sum(completion_tokens)`.as('completion_tokens'),
      sql<number>`sum(charged_usdc)`.as('charged_usdc'),
    ])
    .groupBy(['wallet', sql`created_at / 86400000`, 'api_key_id'])
    .execute();
  // Rows retention removed are counted by their sums, one retired_usage row per cell.
  const retired = await db.selectFrom('retired_usage').selectAll().execute();
  const kept = await db.selectFrom('usage_daily').selectAll().execute();

  const cells = new Map<string, { rows?: Record<string, unknown>; daily?: Record<string, unknown> }>();
  const cell = (r: { wallet: string; day: unknown; api_key_id: unknown }) => {
    const id = `wallet ${r.wallet}, day ${new Date(Number(r.day) * 86_400_000).toISOString().slice(0, 10)}, api key #${Number(r.api_key_id)}`;
    return cells.get(id) ?? cells.set(id, {}).get(id)!;
  };
  for (const r of fromRows) cell(r).rows = r;
  for (const r of retired) {
    const c = cell(r);
    c.rows = Object.fromEntries(COLUMNS.map((k) => [k, Number(c.rows?.[k] ?? 0) + Number(r[k])]));
  }
  for (const d of kept) cell(d).daily = d;

  const problems: string[] = [];
  for (const [id, { rows, daily }] of cells) {
    const wrong = COLUMNS.filter((c) => Number(daily?.[c] ?? 0) !== Number(rows?.[c] ?? 0)).map(
      (c) => `${c} ${Number(daily?.[c] ?? 0)} != ${Number(rows?.[c] ?? 0)}`,
    );
    if (wrong.length > 0) problems.push(`${id}: daily usage totals disagree with request_usage (${wrong.join(', ')})`);
  }
  return problems;
}
