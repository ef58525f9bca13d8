import type { Storage } from '../../storage/database.ts';
import { finishReservation } from '../operations/finish.ts';
import { lateCharge, type LateOutcome } from '../operations/late-charge.ts';
import type { SettleOutcome, SettleRecord } from '../reservations.ts';

export type ApplyOutcome = { kind: 'settled'; outcome: SettleOutcome } | LateOutcome;

/**
 * Bills a produced answer exactly once, whatever happened to its reservation meanwhile:
 * - still pending: the normal settle (charged up to the reservation's wallet balance);
 * - released by the sweeper (voided, no usage row): a late charge, up to the wallet's free balance
 *   (balance minus what other requests have locked) and the room left in its key's spend limit,
 *   with any shortfall recorded;
 * - already finished with a usage row: nothing (the request id is the exactly-once key: the usage
 *   row and the charge entry are both unique per request).
 */
export async function applySettle(storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>, r: SettleRecord, now = Date.now()): Promise<ApplyOutcome> {
  const settled = await finishReservation(storage, r.requestId, r.chargeUsdc, r.usage, now);
  if (settled.applied) return { kind: 'settled', outcome: settled };
  return lateCharge(storage, r, now);
}

/**
 * What an earlier finish of this request charged, if one committed: its usage row (written only by
 * the request's own finish, never by the sweeper). Null when the request was not billed.
 */
export async function billedEarlier(storage: Pick<Storage, 'db'>, r: SettleRecord): Promise<SettleOutcome | null> {
  const row = await storage.db.selectFrom('request_usage').select('charged_usdc').where('request_id', '=', r.requestId).executeTakeFirst();
  if (!row) return null;
  const charged = Number(row.charged_usdc);
  return { applied: true, chargedUsdc: charged, shortfallUsdc: r.chargeUsdc - charged, balanceUsdc: null };
}
