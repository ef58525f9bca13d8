import type { Kysely } from 'kysely';

const USAGE_SUMS = ['request_count', 'prompt_tokens', 'completion_tokens', 'reasoning_tokens', 'cached_tokens', 'charged_usdc', 'provider_cost_usdc'] as const;

/**
 * Retention and ledger-check checkpoints (docs/operations.md, "Retention"):
 * - `ledger_checkpoints`: the ledger proven up to the end of a UTC day, as id boundaries (every row
 *   of ledger_entries, request_usage and reservations at or below them is covered) and the totals
 *   over those rows; `ledger_checkpoint_wallets` and `ledger_checkpoint_usage` hold its per-wallet
 *   ledger sums and per-key usage sums. Only the latest is read; one row per checkpointed day.
 * - `retired_usage` and `retired_key_spend`: the sums of the request_usage rows and finished
 *   reservations retention removed, so the full ledger-check still adds up what the aggregates
 *   (usage_totals, usage_daily, key_spend) were built from.
 * - `job_leases`: which instance runs a single-runner job (the retention job) until when.
 */
export function retention() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('ledger_checkpoints')
        .addColumn('day', 'bigint', (c) => c.primaryKey())
        .addColumn('last_entry_id', 'bigint', (c) => c.notNull())
        .addColumn('last_usage_id', 'bigint', (c) => c.notNull())
        .addColumn('last_reservation_id', 'bigint', (c) => c.notNull())
        .addColumn('entries', 'bigint', (c) => c.notNull())
        .addColumn('credits_usdc', 'bigint', (c) => c.notNull())
        .addColumn('charges_usdc', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('ledger_checkpoint_wallets')
        .addColumn('wallet', 'text', (c) => c.primaryKey())
        .addColumn('ledger_usdc', 'bigint', (c) => c.notNull())
        .execute();
      let usage = db.schema.createTable('ledger_checkpoint_usage').addColumn('api_key_id', 'bigint', (c) => c.primaryKey());
      for (const c of USAGE_SUMS) usage = usage.addColumn(c, 'bigint', (col) => col.notNull().defaultTo(0));
      await usage.execute();
      let retired = db.schema
        .createTable('retired_usage')
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('day', 'bigint', (c) => c.notNull())
        .addColumn('api_key_id', 'bigint', (c) => c.notNull());
      for (const c of USAGE_SUMS) retired = retired.addColumn(c, 'bigint', (col) => col.notNull().defaultTo(0));
      await retired.addPrimaryKeyConstraint('retired_usage_pk', ['wallet', 'day', 'api_key_id']).execute();
      await db.schema
        .createTable('retired_key_spend')
        .addColumn('api_key_id', 'bigint', (c) => c.notNull())
        .addColumn('day', 'bigint', (c) => c.notNull())
        .addColumn('spent_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('retired_key_spend_pk', ['api_key_id', 'day'])
        .execute();
      await db.schema
        .createTable('job_leases')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('holder', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
