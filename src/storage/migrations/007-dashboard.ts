import { sql, type Kysely } from 'kysely';

/**
 * What the wallet dashboard needs from storage:
 * - `dashboard_sessions`: short-lived bearer tokens opened with one SIWE proof, stored only as a
 *   keyed hash (like API keys), so a database leak gives no usable token.
 * - `usage_daily`: running totals per wallet, UTC day and API key, kept in the same statement or
 *   write unit as the request_usage row they add up (like usage_totals), so the 30-day chart reads
 *   at most days × keys rows instead of scanning every request of the wallet. The primary key
 *   starts with (wallet, day): the chart's read is one range of it.
 */
export function dashboard() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('dashboard_sessions')
        .addColumn('token_hash', 'text', (c) => c.primaryKey())
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .execute();
      await db.schema.createIndex('dashboard_sessions_expires').on('dashboard_sessions').column('expires_at').execute();
      await db.schema
        .createTable('usage_daily')
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('day', 'bigint', (c) => c.notNull())
        .addColumn('api_key_id', 'bigint', (c) => c.notNull())
        .addColumn('request_count', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('prompt_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('completion_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('charged_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('usage_daily_pk', ['wallet', 'day', 'api_key_id'])
        .execute();
      await backfillUsageDaily(db);
    },
  };
}

/**
 * Rebuilds the daily totals from request_usage: one pass over it, done once at upgrade (on
 * PostgreSQL inside the migration's transaction, so totals and rows come from one snapshot).
 * Integer division by a day in ms gives the same UTC day number as usageDay() on both engines.
 */
export async function backfillUsageDaily(db: Kysely<any>): Promise<void> {
  await sql`delete from usage_daily`.execute(db);
  await sql`insert into usage_daily (wallet, day, api_key_id, request_count, prompt_tokens, completion_tokens, charged_usdc)
    select wallet, created_at / 86400000, api_key_id, count(*), sum(prompt_tokens), sum(completion_tokens), sum(charged_usdc)
    from request_usage group by wallet, created_at / 86400000, api_key_id`.execute(db);
}
