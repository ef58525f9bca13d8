import type { Storage } from '../../storage/database.ts';
import type { UnitTx } from '../../storage/write-units.ts';
import { usageDay } from '../days.ts';
import { bucketValues } from '../effects/key-spend.ts';
import { closeReservation, statusAfter } from '../effects/reservation.ts';
import { boundOperands, unitStatement, VALUES } from '../effects/statement.ts';
import { bookedCost, usageFigures, usageRow } from '../effects/usage-row.ts';
import { keyLimitCount, roomLeft } from '../key-spend-limit.ts';
import type { SettleOutcome, SettleRecord } from '../reservations.ts';
import { assertAmount, assertMoney, assertWalletFloor } from '../assert.ts';
import { ADD_TO_DAILY, ADD_TO_TOTALS, CHARGE_ENTRY, FINISH_IN_BUCKETS, RELEASE_AND_CHARGE } from './finish.ts';
import { isChannelHoldWallet } from './channel-hold.ts';
import { isUptoHoldWallet } from './upto-hold.ts';

export type LateOutcome =
  | { kind: 'late'; outcome: SettleOutcome }
  /** A usage row exists: this request was already billed (or voided by its own process). */
  | { kind: 'already_billed' }
  /** No reservation has this request id: nothing to bill it against (kept, and logged). */
  | { kind: 'unknown' };

// Takes the wallet's row lock first (PostgreSQL; SQLite's group commit holds the only write lock)
// and reads the balance under it, so the charge computed below cannot race another finish.
const LOCK_WALLET = 'UPDATE wallets SET updated_at = ? WHERE address = ? RETURNING balance_usdc, locked_usdc';
const RESERVATION = 'SELECT wallet, status, api_key_id, created_at, upto_payment_id FROM reservations WHERE request_id = ?';
// Then the reservation's, in the same order as a finish (wallet, then reservation and buckets).
// Retention deletes a swept reservation once it is past the usage window (retire-reservations.ts)
// without the wallet's lock: a row read unlocked could be deleted before this unit commits, and the
// charge would be billed against a reservation no longer there, its key's spend never carried into
// retired_key_spend. Locked, a delete that came first leaves nothing to find (the request is past
// its window, not billed), and one that comes after waits for this unit's commit.
const LOCK_RESERVATION = { sqlite: RESERVATION, postgres: `${RESERVATION} FOR UPDATE` };
const BILLED = 'SELECT 1 AS billed FROM request_usage WHERE request_id = ? AND wallet = ?';
// Read under the wallet lock: a fix of the payment's charge takes the same lock before its release.
const HOLDING_UPTO = "SELECT id FROM payments WHERE id = ? AND upto_state = 'holding'";
// The claim: the first usage row for this request wins; a second apply inserts nothing.
const CLAIM_USAGE = unitStatement(`${usageRow(VALUES, boundOperands())} ON CONFLICT (request_id) DO NOTHING`);
// The swept reservation now records what was charged, so ledger-check's "a finished reservation
// charged once, with exactly the amount it records" keeps holding.
const RECORD_ON_RESERVATION = unitStatement(closeReservation(boundOperands(), { whileStatus: 'voided' }));
const RECORD_SHORTFALL = 'INSERT INTO settle_shortfalls (request_id, wallet, requested_usdc, charged_usdc, created_at) VALUES (?, ?, ?, ?, ?)';

interface Reservation {
  wallet: string;
  status: string;
  api_key_id: number | null;
  created_at: number;
  upto_payment_id: string | null;
}

/**
 * Whether the wallet's money is there for this request. On an upto hold wallet (one per payer) it
 * is only while the payment the request reserved on still holds: once that payment's charge is
 * fixed, whatever the wallet holds is a later payment's maximum, signed for that payment's own
 * request, and the late charge takes nothing (its shortfall recorded, a ledger-check finding).
 * A reservation made before migration 017 names no payment: nothing is taken for it either.
 */
async function holdsForIt(tx: UnitTx, wallet: string, reservation: Reservation): Promise<boolean> {
  // A channel's hold wallet holds one request's ceiling at a time, and a swept request was finished
  // for nothing (channel-hold.ts): what it holds now is a later request's, never this one's.
  if (isChannelHoldWallet(wallet)) return false;
  if (!isUptoHoldWallet(wallet)) return true;
  if (reservation.upto_payment_id === null) return false;
  return (await tx.get(HOLDING_UPTO, [reservation.upto_payment_id])) !== undefined;
}

/**
 * Charges a produced answer whose reservation the sweeper released (voided, no usage row): up to
 * the wallet's free balance (balance minus what other requests have locked) and the room left in
 * its key's spend limit, with any shortfall recorded. The usage row is the exactly-once claim.
 */
export async function lateCharge(storage: Pick<Storage, 'writeUnit' | 'engine'>, r: SettleRecord, now: number): Promise<LateOutcome> {
  assertAmount(`request ${r.requestId}'s late charge`, r.chargeUsdc);
  const lockReservation = LOCK_RESERVATION[storage.engine];
  return storage.writeUnit(
    async (tx): Promise<LateOutcome> => {
      const wallet = await tx.get<{ balance_usdc: number; locked_usdc: number }>(LOCK_WALLET, [now, r.wallet]);
      if (!wallet) return { kind: 'unknown' };
      const reservation = await tx.get<Reservation>(lockReservation, [r.requestId]);
      // A billed reservation leaves after retention.reservationDays, its usage row only after usageDays:
      // a replay in between (a spooled line whose settle had committed, its instance down for days)
      // finds the request billed by that row, not unknown (which would keep the line for good).
      if (!reservation) return (await tx.get(BILLED, [r.requestId, r.wallet])) ? { kind: 'already_billed' } : { kind: 'unknown' };
      // Only the wallet the request reserved on pays for it: a payer's own wallet, its upto hold and
      // its channels' holds are apart, and a record naming another (a bug) finds nothing to bill.
      if (reservation.wallet !== r.wallet) return { kind: 'unknown' };
      const free = (await holdsForIt(tx, r.wallet, reservation)) ? Number(wallet.balance_usdc) - Number(wallet.locked_usdc) : 0;
      // The sweeper gave this request's room in its key's limit back, and other requests may have
      // been admitted into it since: the late charge takes only what the limit still leaves in the
      // period it was reserved in, as it takes only the wallet's free balance (the rest is a shortfall).
      const count = reservation.api_key_id === null ? null : await keyLimitCount(tx, Number(reservation.api_key_id), Number(reservation.created_at));
      const charged = Math.max(0, Math.min(r.chargeUsdc, free, count ? roomLeft(count) : Infinity));
      // The one charge allowed above a reservation's release: still only out of the free balance.
      const within = charged <= r.chargeUsdc && (charged === 0 || charged <= free);
      assertMoney(within, () => `request ${r.requestId}: a late charge of ${charged} (asked ${r.chargeUsdc}, free ${free})`);
      const v = {
        ...usageFigures(r.usage),
        requestId: r.requestId,
        wallet: r.wallet,
        charged,
        providerCost: bookedCost(charged, r.usage.providerCostUsdc),
        at: now,
        day: usageDay(now),
      };
      if ((await CLAIM_USAGE.run(tx, v)) !== 1) return { kind: 'already_billed' };
      // A reservation still pending here was finished by nobody yet: finishReservation would have
      // settled it, so this only happens if it was reserved again under the same id; refuse.
      if (reservation.status === 'pending') throw new Error(`request ${r.requestId}: reservation still pending during a late charge`);
      // The sweeper already released the reservation's lock: only the charge is left to take.
      const after = await RELEASE_AND_CHARGE.get<{ balance_usdc: number }>(tx, { ...v, released: 0 });
      if (charged > 0) await CHARGE_ENTRY.run(tx, { ...v, amount: -charged, note: `${r.usage.model} (late)` });
      await ADD_TO_TOTALS.run(tx, v);
      // Likewise in the key's buckets; the charge is spend of the period the request was reserved
      // in, like any settle.
      if (reservation.api_key_id !== null) {
        await FINISH_IN_BUCKETS.run(tx, { ...v, released: 0, apiKeyId: Number(reservation.api_key_id), ...bucketValues(Number(reservation.created_at)) });
      }
      await ADD_TO_DAILY.run(tx, v);
      await RECORD_ON_RESERVATION.run(tx, { ...v, status: statusAfter(charged) });
      assertWalletFloor(r.wallet, Number(after!.balance_usdc), Number(wallet.locked_usdc));
      if (charged < r.chargeUsdc) await tx.run(RECORD_SHORTFALL, [r.requestId, r.wallet, r.chargeUsdc, charged, now]);
      return {
        kind: 'late',
        outcome: { applied: true, chargedUsdc: charged, shortfallUsdc: r.chargeUsdc - charged, balanceUsdc: Number(after!.balance_usdc) },
      };
    },
    { wallet: r.wallet },
  );
}
