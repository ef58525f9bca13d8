import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

const COLUMNS = ['request_count', 'prompt_tokens', 'completion_tokens', 'reasoning_tokens', 'cached_tokens', 'charged_usdc', 'provider_cost_usdc'] as const;
type Totals = Record<(typeof COLUMNS)[number], number>;

/**
 * The usage totals (what GET /v1/usage/:wallet reports) must equal request_usage summed per key:
 * a finish that wrote a usage row without its totals, or the reverse, shows here. Returns one
 * problem line per key that disagrees, for checkLedger. Reads all of request_usage (and the sums of
 * the rows retention removed): this is the audit, not the hot path.
 */
export async function usageTotalsProblems(db: Kysely<Database>): Promise<string[]> {
  const fromRows = await db
    .selectFrom('request_usage')
    .select([
      'api_key_id',
      sql<number>`count(*)`.as('request_count'),
      sql<number>`sum(prompt_tokens)`.as('prompt_tokens'),
      sql<number>`sum(completion_tokens)`.as('completion_tokens'),
      sql<number>`sum(reasoning_tokens)`.as('reasoning_tokens'),
      sql<number>`sum(cached_tokens)`.as('cached_tokens'),
      sql<number>`sum(charged_usdc)`.as('charged_usdc'),
      sql<number>`sum(provider_cost_usdc)`.as('provider_cost_usdc'),
    ])
    .groupBy('api_key_id')
    .execute();
  // Rows retention removed are counted by their sums (retired_usage).
  const retired = await db
    .selectFrom('retired_usage')
    .select(['api_key_id', ...COLUMNS.map((c) => sql<number>`sum(${sql.ref(c)})`.as(c))])
    .groupBy('api_key_id')
    .execute();
  const kept = await db.selectFrom('usage_totals').selectAll().execute();

  const zero = Object.fromEntries(COLUMNS.map((c) => [c, 0])) as Totals;
  const byKey = new Map<number, { rows: Totals; totals: Totals }>();
  const entry = (key: number) => byKey.get(key) ?? byKey.set(key, { rows: zero, totals: zero }).get(key)!;
  const numbers = (r: Record<string, unknown>) => Object.fromEntries(COLUMNS.map((c) => [c, Number(r[c])])) as Totals;
  for (const r of fromRows) entry(Number(r.api_key_id)).rows = numbers(r);
  for (const r of retired) {
    const e = entry(Number(r.api_key_id));
    const sums = numbers(r);
    e.rows = Object.fromEntries(COLUMNS.map((c) => [c, e.rows[c] + sums[c]])) as Totals;
  }
  for (const t of kept) entry(Number(t.api_key_id)).totals = numbers(t);

  const problems: string[] = [];
  for (const [key, { rows, totals }] of byKey) {
    const wrong = COLUMNS.filter((c) => rows[c] !== totals[c]).map((c) => `${c} ${totals[c]} != ${rows[c]}`);
    if (wrong.length > 0) problems.push(`api key #${key}: usage totals disagree with request_usage (${wrong.join(', ')})`);
  }
  return problems;
}
