import { sql, type Kysely } from 'kysely';

const DAY_MS = 86_400_000;

/**
 * Ledger-check checkpoints at any moment, not only at the end of a UTC day (src/ledger/checkpoints/,
 * docs/operations.md "Ledger-check checkpoints"): the gateway takes one every few seconds, so an
 * operator's check reads only the last short period.
 * - `ledger_checkpoints` is keyed by `at` (epoch ms: the moment its id boundaries were read) instead
 *   of a day number; `cells_from` is the first UTC day whose usage_daily cells it holds.
 * - `ledger_checkpoint_days`: those cells (wallet, key, day → requests, charged) for the rows the
 *   checkpoint covers, so a check after a mid-day checkpoint proves that day's usage_daily without
 *   rereading the day. Only the latest checkpoint's cells are kept, like its wallet sums.
 * A day checkpoint of migration 016 becomes one at the day's end, holding no cells: every row it
 * covers was created before that end (its boundary was the last row below the first of the next day).
 */
export function checkpointPeriods() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('ledger_checkpoints_at')
        .addColumn('at', 'bigint', (c) => c.primaryKey())
        .addColumn('cells_from', 'bigint', (c) => c.notNull())
        .addColumn('last_entry_id', 'bigint', (c) => c.notNull())
        .addColumn('last_usage_id', 'bigint', (c) => c.notNull())
        .addColumn('last_reservation_id', 'bigint', (c) => c.notNull())
        .addColumn('entries', 'bigint', (c) => c.notNull())
        .addColumn('credits_usdc', 'bigint', (c) => c.notNull())
        .addColumn('charges_usdc', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await sql`insert into ledger_checkpoints_at (at, cells_from, last_entry_id, last_usage_id, last_reservation_id, entries, credits_usdc, charges_usdc, created_at)
        select (day + 1) * ${sql.lit(DAY_MS)}, day + 1, last_entry_id, last_usage_id, last_reservation_id, entries, credits_usdc, charges_usdc, created_at
        from ledger_checkpoints`.execute(db);
      await db.schema.dropTable('ledger_checkpoints').execute();
      await db.schema.alterTable('ledger_checkpoints_at').renameTo('ledger_checkpoints').execute();
      await db.schema
        .createTable('ledger_checkpoint_days')
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('api_key_id', 'bigint', (c) => c.notNull())
        .addColumn('day', 'bigint', (c) => c.notNull())
        .addColumn('request_count', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('charged_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('ledger_checkpoint_days_pk', ['wallet', 'api_key_id', 'day'])
        .execute();
    },
  };
}
