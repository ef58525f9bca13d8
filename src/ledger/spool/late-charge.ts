import type { Storage } from '../../storage/database.ts';
import { FINISH_IN_BUCKETS, finishInBucketsParams, keyLimitCount, roomLeft } from '../key-spend.ts';
import { ADD_TO_DAILY, ADD_TO_TOTALS, finishReservation, usageDay, INSERT_CHARGE, INSERT_USAGE, type SettleOutcome, type UsageRecord } from '../reservations.ts';

/** A produced answer's bill: what `finishReservation` is asked, kept whole so it can be retried or spooled. */
export interface SettleRecord {
  requestId: string;
  wallet: string;
  chargeUsdc: number;
  usage: UsageRecord;
}

export type ApplyOutcome =
  | { kind: 'settled'; outcome: SettleOutcome }
  | { kind: 'late'; outcome: SettleOutcome }
  /** A usage row exists: this request was already billed (or voided by its own process). */
  | { kind: 'already_billed' }
  /** No reservation has this request id: nothing to bill it against (kept, and logged). */
  | { kind: 'unknown' };

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

// Takes the wallet's row lock first (PostgreSQL; SQLite's group commit holds the only write lock)
// and reads the balance under it, so the charge computed below cannot race another finish.
const LOCK_WALLET = 'UPDATE wallets SET updated_at = ? WHERE address = ? RETURNING balance_usdc, locked_usdc';
const RESERVATION_STATUS = 'SELECT status, api_key_id, created_at FROM reservations WHERE request_id = ?';
// The claim: the first usage row for this request wins; a second apply inserts nothing.
const CLAIM_USAGE = `${INSERT_USAGE} ON CONFLICT (request_id) DO NOTHING`;
const CHARGE = 'UPDATE wallets SET balance_usdc = balance_usdc - ? WHERE address = ? RETURNING balance_usdc';
// The swept reservation now records what was charged, so ledger-check's "a finished reservation
// charged once, with exactly the amount it records" keeps holding.
const RECORD_ON_RESERVATION = "UPDATE reservations SET status = ?, charged_usdc = ?, finished_at = ? WHERE request_id = ? AND status = 'voided'";
const RECORD_SHORTFALL = 'INSERT INTO settle_shortfalls (request_id, wallet, requested_usdc, charged_usdc, created_at) VALUES (?, ?, ?, ?, ?)';

async function lateCharge(storage: Pick<Storage, 'writeUnit'>, r: SettleRecord, now: number): Promise<ApplyOutcome> {
  return storage.writeUnit(async (tx): Promise<ApplyOutcome> => {
    const reservation = await tx.get<{ status: string; api_key_id: number | null; created_at: number }>(RESERVATION_STATUS, [r.requestId]);
    if (!reservation) return { kind: 'unknown' };
    const wallet = await tx.get<{ balance_usdc: number; locked_usdc: number }>(LOCK_WALLET, [now, r.wallet]);
    if (!wallet) return { kind: 'unknown' };
    const free = Number(wallet.balance_usdc) - Number(wallet.locked_usdc);
    // The sweeper gave this request's room in its key's limit back, and other requests may have
    // been admitted into it since: the late charge takes only what the limit still leaves in the
    // period it was reserved in, as it takes only the wallet's free balance (the rest is a shortfall).
    const count = reservation.api_key_id === null ? null : await keyLimitCount(tx, Number(reservation.api_key_id), Number(reservation.created_at));
    const charged = Math.max(0, Math.min(r.chargeUsdc, free, count ? roomLeft(count) : Infinity));
    const u = r.usage;
    const cost = charged > 0 ? u.providerCostUsdc : 0;
    const claimed = await tx.run(CLAIM_USAGE, [
      r.requestId, u.apiKeyId, r.wallet, u.model, u.provider, u.promptTokens, u.completionTokens, u.reasoningTokens,
      u.cachedTokens, charged, cost, u.status, u.latencyMs, u.estimated ? 1 : 0, now,
    ]);
    if (claimed !== 1) return { kind: 'already_billed' };
    // A reservation still pending here was finished by nobody yet: finishReservation would have
    // settled it, so this only happens if it was reserved again under the same id; refuse.
    if (reservation.status === 'pending') throw new Error(`request ${r.requestId}: reservation still pending during a late charge`);
    const after = await tx.get<{ balance_usdc: number }>(CHARGE, [charged, r.wallet]);
    if (charged > 0) await tx.run(INSERT_CHARGE, [r.wallet, -charged, r.requestId, `${u.model} (late)`, now]);
    await tx.run(ADD_TO_TOTALS, [u.apiKeyId, u.promptTokens, u.completionTokens, u.reasoningTokens, u.cachedTokens, charged, cost]);
    // The sweeper already released the reservation from the key's buckets; the charge is spend of
    // the period the request was reserved in, like any settle.
    if (reservation.api_key_id !== null) {
      await tx.run(FINISH_IN_BUCKETS, finishInBucketsParams(charged, 0, Number(reservation.api_key_id), Number(reservation.created_at)));
    }
    await tx.run(ADD_TO_DAILY, [r.wallet, usageDay(now), u.apiKeyId, u.promptTokens, u.completionTokens, charged]);
    await tx.run(RECORD_ON_RESERVATION, [charged > 0 ? 'settled' : 'voided', charged, now, r.requestId]);
    if (charged < r.chargeUsdc) await tx.run(RECORD_SHORTFALL, [r.requestId, r.wallet, r.chargeUsdc, charged, now]);
    const outcome: SettleOutcome = { applied: true, chargedUsdc: charged, shortfallUsdc: r.chargeUsdc - charged, balanceUsdc: Number(after!.balance_usdc) };
    return { kind: 'late', outcome };
  });
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
