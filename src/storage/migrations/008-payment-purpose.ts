import type { Kysely } from 'kysely';

/**
 * What a payment was first taken for: `topup` (POST /v1/topup) or `chat` (pay-per-request). A
 * credited chat payment may be sent again for a short while to run requests against the payer's
 * balance (a client's retry); a top-up's payment header never may, so one that leaks (a log, a
 * proxy) cannot run inference on the payer's balance. Rows recorded before this are top-ups.
 */
export function paymentPurpose() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .alterTable('payments')
        .addColumn('purpose', 'text', (c) => c.notNull().defaultTo('topup'))
        .execute();
    },
  };
}
