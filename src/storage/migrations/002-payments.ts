import { sql, type Kysely } from 'kysely';

/**
 * x402 top-up payments. A row is written before settlement is attempted, so a crash between the
 * settlement transaction and the credit leaves a record the reconciler can finish. Identity is the
 * authorization itself: (network, asset, payer, nonce) can be credited once, and one transaction can
 * pay for one row only.
 */
export function payments() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('payments')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('network', 'text', (c) => c.notNull())
        .addColumn('asset', 'text', (c) => c.notNull())
        .addColumn('payer', 'text', (c) => c.notNull())
        .addColumn('nonce', 'text', (c) => c.notNull())
        .addColumn('transfer_method', 'text', (c) => c.notNull())
        .addColumn('pay_to', 'text', (c) => c.notNull())
        // Token units can exceed 2^53 for 18-decimal tokens, so they are kept as decimal text.
        .addColumn('amount_atomic', 'text', (c) => c.notNull())
        .addColumn('amount_usdc', 'bigint', (c) => c.notNull())
        .addColumn('payload_digest', 'text', (c) => c.notNull())
        .addColumn('valid_before', 'bigint', (c) => c.notNull())
        .addColumn('from_block', 'bigint', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('tx_hash', 'text')
        .addColumn('failure_reason', 'text')
        .addColumn('balance_after_usdc', 'bigint')
        .addColumn('locked_after_usdc', 'bigint')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addColumn('updated_at', 'bigint', (c) => c.notNull())
        .addColumn('credited_at', 'bigint')
        .addCheckConstraint('payments_status_known', sql`status in ('pending', 'submitted', 'credited', 'failed')`)
        .addCheckConstraint('payments_amount_positive', sql`amount_usdc > 0`)
        .execute();
      await db.schema.createIndex('payments_authorization').on('payments').columns(['network', 'asset', 'payer', 'nonce']).unique().execute();
      await db.schema
        .createIndex('payments_transaction')
        .on('payments')
        .columns(['network', 'tx_hash'])
        .unique()
        .where(sql.ref('tx_hash'), 'is not', null)
        .execute();
      await db.schema.createIndex('payments_open').on('payments').columns(['status', 'updated_at']).execute();
      await db.schema.createIndex('payments_payer').on('payments').columns(['payer', 'created_at']).execute();
    },
  };
}
