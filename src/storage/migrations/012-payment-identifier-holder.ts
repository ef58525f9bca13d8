import type { Kysely } from 'kysely';

/**
 * The request that holds a payment identifier's claim: a claim is freed
 * only by the request holding it (compare-and-delete), so a request whose payment could not be
 * settled cannot free the claim another request took over with the same payment while it is
 * being settled, which would let a third request pay again under the identifier. Null on rows
 * written before (they are pruned within a day, and nothing holds them any more).
 */
export function paymentIdentifierHolder() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('payment_identifiers').addColumn('holder', 'text').execute();
    },
  };
}
