import { sql, type Kysely } from 'kysely';

/**
 * Running usage totals per API key, so `GET /v1/usage/:wallet` reads one row per key instead of
 * aggregating every request the wallet ever made (with 1M rows that read took 0.3 s and, on
 * SQLite, held the only connection for every other wallet). The finish that writes a request_usage
 * row adds it to these totals in the same statement (PostgreSQL) or write unit (SQLite), so the
 * two never disagree; `checkLedger` verifies it. No foreign key to api_keys: request_usage has
 * none either, and the totals must accept every row request_usage does.
 */
export function usageTotals() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('usage_totals')
        .addColumn('api_key_id', 'bigint', (c) => c.primaryKey())
        .addColumn('request_count', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('prompt_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('completion_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('reasoning_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('cached_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('charged_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('provider_cost_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .execute();
      await backfillUsageTotals(db);
    },
  };
}

/**
 * Rebuilds the totals from request_usage (one pass over it, done once at upgrade). On PostgreSQL
 * the migration runs in one transaction, so totals and rows are taken from the same snapshot.
 */
export async function backfillUsageTotals(db: Kysely<any>): Promise<void> {
  await sql`delete from usage_totals`.execute(db);
  await sql`insert into usage_totals
      (api_key_id, request_count, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, charged_usdc, provider_cost_usdc)
    select api_key_id, count(*), sum(prompt_tokens), sum(completion_tokens), sum(reasoning_tokens), sum(cached_tokens),
           sum(charged_usdc), sum(provider_cost_usdc)
    from request_usage group by api_key_id`.execute(db);
}
