import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

export interface ChargeAboveReservation {
  requestId: string;
  wallet: string;
  reservedUsdc: number;
  chargedUsdc: number;
}

/**
 * Reservations charged more than they locked. The reservation is meant to bound the charge, so
 * each is a provider that reported more usage than the request allowed (or a bound that missed an
 * input): the wallet paid it out of its free balance, so the books still balance, but the operator
 * should look at the provider's bill for these requests. Newest first, at most `limit`, after `afterId`.
 */
export async function findChargesAboveReservation(db: Kysely<Database>, limit = 100, afterId = 0): Promise<ChargeAboveReservation[]> {
  const rows = await db
    .selectFrom('reservations')
    .select(['request_id', 'wallet', 'amount_usdc', 'charged_usdc'])
    .where('id', '>', afterId)
    // `status || ''`: on the bare column SQLite walks every settled reservation by its status index
    // and filters the id afterwards; the incremental check wants the id range after its checkpoint.
    .where(sql`status || ''`, '=', 'settled')
    .whereRef('charged_usdc', '>', 'amount_usdc')
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ requestId: r.request_id, wallet: r.wallet, reservedUsdc: Number(r.amount_usdc), chargedUsdc: Number(r.charged_usdc) }));
}
