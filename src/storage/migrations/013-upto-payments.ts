import { sql, type Kysely } from 'kysely';

/**
 * x402 `upto` on pay-per-request. An upto payment keeps `status` as it is
 * (`credited` once its maximum is held for its request); its own life after that is a separate
 * nullable column, so `payments_status_known` (migration 002), which SQLite cannot alter in place,
 * stays untouched and no table is rebuilt:
 * - `upto_state`: null for exact payments; `holding` (the maximum credited to the hold wallet, the
 *   request running), `settling` (the charge known and written to `settle_amount_atomic`, the
 *   settlement being sent), `settled`, `unsettled` (the settle failed after the answer was
 *   delivered), `written_off` (the operator recorded the loss);
 * - `settle_amount_atomic`: what is settled on chain, written before anything is sent;
 * - `upto_payload`: the signed payload (public once settled), so that a restart, the reconciler and
 *   `tollgate admin upto retry` can settle exactly this authorization for exactly that amount.
 * A partial unique index keeps at most one open (holding, settling or unsettled) upto payment per
 * payer, on both engines: the exposure is one reservation per payer.
 */
export function uptoPayments() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .alterTable('payments')
        .addColumn('upto_state', 'text', (c) => c.check(sql`upto_state in ('holding', 'settling', 'settled', 'unsettled', 'written_off')`))
        .execute();
      await db.schema.alterTable('payments').addColumn('settle_amount_atomic', 'text').execute();
      await db.schema.alterTable('payments').addColumn('upto_payload', 'text').execute();
      await sql`create unique index payments_one_open_upto on payments (payer) where upto_state in ('holding', 'settling', 'unsettled')`.execute(db);
    },
  };
}
