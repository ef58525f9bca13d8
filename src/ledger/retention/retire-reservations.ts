import { sql, type ExpressionBuilder } from 'kysely';
import type { Storage } from '../../storage/database.ts';
import type { Database } from '../../storage/schema.ts';
import { usageDay } from '../days.ts';
import type { RetentionBatch } from './retire-usage.ts';

export interface ReservationBatch extends RetentionBatch {
  /**
   * A reservation the sweeper released has no usage row: its answer may still come back as a late
   * charge (a settle spooled on an instance that was down), which bills it only while the
   * reservation is there. Such a one stays until this cutoff, the usage window's.
   */
  unbilledCutoff: number;
  /**
   * The latest checkpoint's last usage id: a reservation whose usage row is above it was finished
   * after that checkpoint (a late charge on a swept one, days after its request: its own id is below
   * the boundary, its charge above). Removed before the next check, no check would ever read that
   * charge against it (charged once, charged above its reservation): it waits for the next checkpoint.
   */
  provenUsageId: number;
}

/**
 * Which finished reservations may leave: billed (a usage row exists, so a late charge would find
 * it billed anyway), or unbilled and past the usage window; either way only once a checkpoint
 * covers its usage row, if any (provenUsageId). Never one made on an upto hold: the
 * full ledger-check ties what left each hold to the charges of its own requests through them, and
 * they are one per upto payment, whose row is kept for good anyway.
 */
const leavable =
  (b: ReservationBatch) =>
  ({ and, or, not, exists, selectFrom, eb }: ExpressionBuilder<Database, 'reservations'>) =>
    and([
      eb('reservations.status', '!=', 'pending'),
      eb('reservations.upto_payment_id', 'is', null),
      // Finished after the latest checkpoint (its usage row above it): a check has not read its charge yet.
      not(exists(selectFrom('request_usage as u').select('u.id').whereRef('u.request_id', '=', 'reservations.request_id').where('u.id', '>', b.provenUsageId))),
      or([
        eb('reservations.created_at', '<', b.unbilledCutoff),
        exists(selectFrom('request_usage as u').select('u.id').whereRef('u.request_id', '=', 'reservations.request_id')),
      ]),
    ]);

/**
 * One batch of finished reservations leaving the hot table. A finished reservation is no longer
 * money: its settle (the charge entry, the usage row, the key's spend) was applied in the same
 * write unit that finished it. What key_spend's audit read from it (its key, its day, its usage
 * row's charge) is added to retired_key_spend in the same transaction as the delete, counting
 * only the rows this delete removed, so two runners never count one twice. Returns the rows deleted.
 */
export async function retireReservationBatch(storage: Pick<Storage, 'db'>, b: ReservationBatch): Promise<number> {
  const candidates = await storage.db
    .selectFrom('reservations')
    .select('id')
    .where('id', '<=', b.coveredId)
    .where('created_at', '<', b.cutoff)
    .where(leavable(b))
    .orderBy('id')
    .limit(b.rows)
    .execute();
  if (candidates.length === 0) return 0;
  const ids = candidates.map((r) => r.id);
  return storage.db.transaction().execute(async (trx) => {
    // The charges are read after the delete, not before: on PostgreSQL the delete waits for a late
    // charge that holds one of these rows (late-charge.ts locks its swept reservation), and a charge
    // read before that wait would miss the usage row the late charge commits, leaving its key spend
    // out of retired_key_spend.
    const deleted = await trx
      .deleteFrom('reservations')
      .where('id', 'in', ids)
      .where(leavable(b))
      .returning(['id', 'request_id', 'api_key_id', 'created_at'])
      .execute();
    if (deleted.length === 0) return 0;
    const charged = await trx
      .selectFrom('request_usage')
      .select(['request_id', 'charged_usdc'])
      .where(
        'request_id',
        'in',
        deleted.map((r) => r.request_id),
      )
      .execute();
    const chargeOf = new Map(charged.map((c) => [c.request_id, Number(c.charged_usdc)]));
    const spent = new Map<string, { api_key_id: number; day: number; spent_usdc: number }>();
    for (const r of deleted) {
      const charge = chargeOf.get(r.request_id) ?? 0;
      if (r.api_key_id === null || charge === 0) continue;
      const cell = { api_key_id: Number(r.api_key_id), day: usageDay(Number(r.created_at)), spent_usdc: 0 };
      const id = `${cell.api_key_id} ${cell.day}`;
      (spent.get(id) ?? spent.set(id, cell).get(id)!).spent_usdc += charge;
    }
    for (const cell of spent.values()) {
      await trx
        .insertInto('retired_key_spend')
        .values(cell)
        .onConflict((oc) => oc.columns(['api_key_id', 'day']).doUpdateSet({ spent_usdc: sql`retired_key_spend.spent_usdc + excluded.spent_usdc` }))
        .execute();
    }
    return deleted.length;
  });
}
