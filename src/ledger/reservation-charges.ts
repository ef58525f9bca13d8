import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/** Finished reservations with their charge entries counted and summed; callers narrow it by id. */
export function finishedReservationCharges(db: Kysely<Database>) {
  return db
    .selectFrom('reservations as r')
    .select([
      'r.request_id',
      'r.charged_usdc',
      sql<number>`(select count(*) from ledger_entries e where e.kind = 'charge' and e.reference = r.request_id)`.as('charge_entries'),
      sql<number>`coalesce((select -sum(e.amount_usdc) from ledger_entries e where e.kind = 'charge' and e.reference = r.request_id), 0)`.as(
        'charged_by_ledger',
      ),
    ])
    .where('r.status', '!=', 'pending');
}

/** A finished reservation is charged by exactly one entry when it records a charge, none otherwise, for exactly what it records. */
type ReservationCharges = { request_id: string; charged_usdc: number | null; charge_entries: number; charged_by_ledger: number };

export function reservationChargeProblems(rows: readonly ReservationCharges[]): string[] {
  const problems: string[] = [];
  for (const r of rows) {
    const charged = Number(r.charged_usdc ?? 0);
    const expectedEntries = charged > 0 ? 1 : 0;
    if (Number(r.charge_entries) !== expectedEntries) problems.push(`request ${r.request_id}: ${r.charge_entries} charge entries, expected ${expectedEntries}`);
    if (Number(r.charged_by_ledger) !== charged) {
      problems.push(`request ${r.request_id}: ledger charged ${r.charged_by_ledger}, reservation records ${charged}`);
    }
  }
  return problems;
}
