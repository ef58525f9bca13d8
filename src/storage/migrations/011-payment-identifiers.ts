import type { Kysely } from 'kysely';

/**
 * x402 `payment-identifier`: the idempotency keys of paid requests. One row per
 * (payer, id): the request body and the payment it was first sent with (SHA-256 digests), whether
 * the request has run (`request_id` set when it started), and when it was first seen, so a retry
 * with the same identifier is never paid or run twice (src/payments/pay-per-request/payment-identifier.ts).
 * The key is per payer: identifiers are the client's choice, and one payer's must never reach
 * another's request. Not money: the ledger is untouched; rows are pruned after a day.
 */
export function paymentIdentifiers() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('payment_identifiers')
        .addColumn('payer', 'text', (c) => c.notNull())
        .addColumn('id', 'text', (c) => c.notNull())
        .addColumn('body_digest', 'text', (c) => c.notNull())
        .addColumn('payment_digest', 'text', (c) => c.notNull())
        .addColumn('request_id', 'text')
        .addColumn('created_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('payment_identifiers_pk', ['payer', 'id'])
        .execute();
      await db.schema.createIndex('payment_identifiers_created').on('payment_identifiers').column('created_at').execute();
    },
  };
}
