import { sql, type Kysely, type CreateTableBuilder } from 'kysely';
import type { Engine } from '../database.ts';

/**
 * The foundation schema: wallets and their append-only ledger, reservations, API keys, SIWE
 * nonces, redeem and referral codes, per-request usage, and settings.
 */
export function foundation(engine: Engine) {
  // One identity column type per engine; everything else is portable.
  const withId = <T extends string>(t: CreateTableBuilder<T, never>) =>
    engine === 'sqlite' ? t.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement()) : t.addColumn('id', 'bigserial', (c) => c.primaryKey());

  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('wallets')
        .addColumn('address', 'text', (c) => c.primaryKey())
        .addColumn('balance_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('locked_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addCheckConstraint('wallets_balance_nonnegative', sql`balance_usdc >= 0`)
        .addCheckConstraint('wallets_locked_nonnegative', sql`locked_usdc >= 0`)
        .addCheckConstraint('wallets_locked_within_balance', sql`locked_usdc <= balance_usdc`)
        .execute();

      await withId(db.schema.createTable('ledger_entries'))
        .addColumn('wallet', 'text', (c) => c.notNull().references('wallets.address'))
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('amount_usdc', 'bigint', (c) => c.notNull())
        .addColumn('reference', 'text')
        .addColumn('note', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addCheckConstraint('ledger_kind_known', sql`kind in ('topup', 'redeem', 'referral_share', 'adjustment', 'charge')`)
        .execute();
      await db.schema.createIndex('ledger_entries_wallet').on('ledger_entries').columns(['wallet', 'id']).execute();
      // One cause moves money once: a payment, a redeem code or a request can have only one entry of
      // each kind. NULL references (manual adjustments) are distinct in both engines.
      await db.schema.createIndex('ledger_entries_once').on('ledger_entries').columns(['kind', 'reference']).unique().execute();
      await makeLedgerAppendOnly(db, engine);

      await withId(db.schema.createTable('reservations'))
        .addColumn('wallet', 'text', (c) => c.notNull().references('wallets.address'))
        .addColumn('api_key_id', 'bigint')
        .addColumn('request_id', 'text', (c) => c.notNull().unique())
        .addColumn('amount_usdc', 'bigint', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('charged_usdc', 'bigint')
        .addColumn('lease_expires_at', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('finished_at', 'bigint')
        .addCheckConstraint('reservations_status_known', sql`status in ('pending', 'settled', 'voided')`)
        .addCheckConstraint('reservations_amount_positive', sql`amount_usdc > 0`)
        .execute();
      await db.schema.createIndex('reservations_pending_lease').on('reservations').columns(['status', 'lease_expires_at']).execute();

      await withId(db.schema.createTable('api_keys'))
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('last4', 'text', (c) => c.notNull())
        .addColumn('label', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('revoked_at', 'bigint')
        .addColumn('last_used_at', 'bigint')
        .execute();
      await db.schema.createIndex('api_keys_wallet').on('api_keys').columns(['wallet', 'id']).execute();

      await db.schema
        .createTable('siwe_nonces')
        .addColumn('address', 'text', (c) => c.notNull())
        .addColumn('nonce', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('siwe_nonces_pk', ['address', 'nonce'])
        .execute();
      await db.schema.createIndex('siwe_nonces_expiry').on('siwe_nonces').column('expires_at').execute();

      await withId(db.schema.createTable('redeem_codes'))
        .addColumn('code_hash', 'text', (c) => c.notNull().unique())
        .addColumn('value_usdc', 'bigint', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('redeemed_by', 'text')
        .addColumn('redeemed_at', 'bigint')
        .addCheckConstraint('redeem_codes_value_positive', sql`value_usdc > 0`)
        .execute();

      await db.schema
        .createTable('referral_codes')
        .addColumn('code', 'text', (c) => c.primaryKey())
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('referral_attributions')
        .addColumn('wallet', 'text', (c) => c.primaryKey())
        .addColumn('referrer', 'text', (c) => c.notNull())
        .addColumn('code', 'text', (c) => c.notNull())
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();

      await withId(db.schema.createTable('request_usage'))
        .addColumn('request_id', 'text', (c) => c.notNull().unique())
        .addColumn('api_key_id', 'bigint', (c) => c.notNull())
        .addColumn('wallet', 'text', (c) => c.notNull())
        .addColumn('model', 'text', (c) => c.notNull())
        .addColumn('provider', 'text', (c) => c.notNull())
        .addColumn('prompt_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('completion_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('reasoning_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('cached_tokens', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('charged_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('provider_cost_usdc', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('latency_ms', 'bigint', (c) => c.notNull())
        .addColumn('estimated', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('request_usage_key').on('request_usage').column('api_key_id').execute();
      await db.schema.createIndex('request_usage_wallet').on('request_usage').columns(['wallet', 'created_at']).execute();

      await db.schema
        .createTable('settings')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('value', 'text', (c) => c.notNull())
        .execute();
    },
  };
}

/** The ledger is history: the database itself refuses to rewrite or delete it. */
async function makeLedgerAppendOnly(db: Kysely<any>, engine: Engine): Promise<void> {
  if (engine === 'sqlite') {
    for (const op of ['UPDATE', 'DELETE']) {
      await sql
        .raw(`CREATE TRIGGER ledger_entries_no_${op.toLowerCase()} BEFORE ${op} ON ledger_entries
              BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only'); END`)
        .execute(db);
    }
    return;
  }
  await sql
    .raw(`CREATE FUNCTION ledger_entries_append_only() RETURNS trigger AS $$
          BEGIN RAISE EXCEPTION 'ledger_entries is append-only'; END $$ LANGUAGE plpgsql`)
    .execute(db);
  await sql
    .raw(`CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
          FOR EACH ROW EXECUTE FUNCTION ledger_entries_append_only()`)
    .execute(db);
}
