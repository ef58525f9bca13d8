import type { Kysely } from 'kysely';

/**
 * `payments.request_digest`: the request an exact pay-per-request payment was first sent with
 * (src/payments/pay-per-request/request-digest.ts); null for top-ups and for payments recorded
 * before this migration, which therefore run no request when sent again. And an index on
 * `payload_digest`: a payment identifier claimed by a payment that settled nothing is looked up by
 * it (pay-per-request/identifier-store.ts), on a path any payer can reach.
 */
export function paymentRequestDigest() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('payments').addColumn('request_digest', 'text').execute();
      await db.schema.createIndex('payments_payload_digest').on('payments').column('payload_digest').execute();
    },
  };
}
