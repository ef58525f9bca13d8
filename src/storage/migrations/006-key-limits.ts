import { sql, type Kysely } from 'kysely';
import { expectedKeySpend } from '../../ledger/key-spend-audit.ts';

/**
 * Per-key spend controls (issue 17): a spend limit over a period, a model allowlist and an expiry on
 * each API key, and `key_spend`, the running spend of each key per period bucket (see
 * src/keys/spend-periods.ts), kept in the same unit as the wallet's reservation and finish.
 * Existing reservations are counted into it here, so keys used before the upgrade start with
 * their true spend. Run it with every instance stopped (as every migration): an old instance
 * would not count its requests.
 */
export function keyLimits() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('api_keys').addColumn('spend_limit_usdc', 'bigint').execute();
      await db.schema.alterTable('api_keys').addColumn('spend_limit_period', 'text').execute();
      // A JSON array of full model ids (`provider/name`); NULL means every model.
      await db.schema.alterTable('api_keys').addColumn('allowed_models', 'text').execute();
      await db.schema.alterTable('api_keys').addColumn('expires_at', 'bigint').execute();

      await db.schema
        .createTable('key_spend')
        .addColumn('api_key_id', 'bigint', (c) => c.notNull())
        .addColumn('period', 'text', (c) => c.notNull())
        .addColumn('spent_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('locked_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addPrimaryKeyConstraint('key_spend_pk', ['api_key_id', 'period'])
        .addCheckConstraint('key_spend_not_negative', sql`spent_usdc >= 0 and locked_usdc >= 0`)
        .execute();

      const rows = await expectedKeySpend(db);
      for (let i = 0; i < rows.length; i += 500) {
        await db.insertInto('key_spend').values(rows.slice(i, i + 500)).execute();
      }
    },
  };
}
