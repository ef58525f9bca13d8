import type { Kysely } from 'kysely';

/**
 * Shortfalls of late charges (src/ledger/operations/late-charge.ts): an answer whose settle was spooled
 * while the database was down, and whose reservation the sweeper released meanwhile, is charged
 * up to the wallet's free balance; what could not be charged is kept here for ledger-check.
 */
export function settleShortfalls() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('settle_shortfalls')
        .addColumn('request_id', 'text', (c) => c.primaryKey())
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('requested_usdc', 'bigint', (c) => c.notNull())
        .addColumn('charged_usdc', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
    },
  };
}
