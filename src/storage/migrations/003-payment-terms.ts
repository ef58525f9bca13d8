import { sql, type Kysely } from 'kysely';

/**
 * A payment's terms are fixed once recorded, and its credit comes from the chain's own record.
 * - `terms_digest`: SHA-256 of the whole signed payload (every authorization field and the
 *   signature), so "the same payment" means exactly the same payload, not just the same signature.
 * - `token_decimals`: the offer's decimals when the payment was recorded, so the credit can be
 *   recomputed from the token amount without the config (ledger-check).
 * - `onchain_amount_atomic`: the token units the settling transaction moved from the payer to payTo
 *   for this authorization, read from its Transfer log; the credit is this amount in micro-USDC.
 *
 * Rows recorded before this migration keep a null `terms_digest` (they are compared by their other
 * columns). Their decimals are recovered from the two amounts they recorded together, which agree
 * by construction (amount_atomic = amount_usdc × 10^(decimals − 6)) unless a row was reopened with
 * other terms by the defect this migration closes: such a row keeps null decimals, and ledger-check
 * reports it. Credited rows were credited only after a Transfer of exactly `amount_atomic` to payTo
 * was found, so that is their on-chain amount (`ledger-check --chain` re-reads it).
 */
export function paymentTerms() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('payments').addColumn('terms_digest', 'text').execute();
      await db.schema.alterTable('payments').addColumn('token_decimals', 'integer').execute();
      await db.schema.alterTable('payments').addColumn('onchain_amount_atomic', 'text').execute();
      // Offers allow 6 to 36 decimals (src/config/schema.ts).
      for (let extra = 0; extra <= 30; extra++) {
        const zeros = '0'.repeat(extra);
        await sql`update payments set token_decimals = ${6 + extra}
                  where token_decimals is null and amount_atomic = cast(amount_usdc as text) || ${zeros}`.execute(db);
      }
      await sql`update payments set onchain_amount_atomic = amount_atomic where status = 'credited'`.execute(db);
    },
  };
}
