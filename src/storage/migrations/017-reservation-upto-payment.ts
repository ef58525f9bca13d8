import type { Kysely } from 'kysely';

/**
 * A reservation on an upto hold wallet `<payer>#upto` names the upto payment whose maximum it was
 * made on (written by reserve, src/ledger/effects/reservation.ts): a late charge takes money only
 * while that payment still holds (late-charge.ts), and ledger-check matches what left each payment's
 * hold to its own requests' charges (upto-check.ts). Older reservations keep NULL: a late charge for
 * one takes nothing, and payments held before this migration are checked as before
 * (docs/DECISIONS.md, "Upto holds are ledger operations"). Adding a nullable column rewrites no row.
 */
export function reservationUptoPayment() {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('reservations').addColumn('upto_payment_id', 'text').execute();
    },
  };
}
