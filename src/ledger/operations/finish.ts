import type { Storage } from '../../storage/database.ts';
import { usageDay } from '../days.ts';
import { chargeEntry } from '../effects/charge-entry.ts';
import { BOUND_BUCKETS, bucketsOfColumn, bucketValues, finishInBuckets } from '../effects/key-spend.ts';
import { closeReservation, statusAfterSql } from '../effects/reservation.ts';
import { boundOperands, counterStatement, param, postgresStatement, selectFrom, unitStatement, VALUES } from '../effects/statement.ts';
import { addToDaily } from '../effects/usage-daily.ts';
import { bookedCost, bookedCostSql, usageFigures, usageRow } from '../effects/usage-row.ts';
import { addToTotals } from '../effects/usage-totals.ts';
import { releaseAndCharge } from '../effects/wallet.ts';
import type { SettleOutcome, UsageRecord } from '../reservations.ts';
import { assertAmount, assertMoney, assertWalletFloor } from '../assert.ts';

/**
 * Settle and void: the second phase (see ../reservations.ts). What a finish may charge: up to what
 * is asked, out of what the wallet `w` holds once this reservation's own lock is released (other
 * requests' locks stay), never below zero; in PostgreSQL's finish statement (reservation `r`) and
 * in SQLite's closing UPDATE (the reservation is the table written).
 */
const payableSql = (asked: string) => `GREATEST(0, LEAST(${asked}::bigint, w.balance_usdc - (w.locked_usdc - r.amount_usdc)))`;
const payableSqlite = (asked: string) => `max(0, min(${asked}, w.balance_usdc - (w.locked_usdc - reservations.amount_usdc)))`;

// SQLite: the reservation is closed with its charge, computed from its wallet's row, in one
// statement that returns what the rest of the unit writes (one call into SQLite instead of a read
// and an update). Group commit holds the only write lock, so nothing changes either row before
// this unit commits; `status = 'pending'` is the exactly-once guard.
const sqliteCharge = payableSqlite(param('asked'));
const CLOSE_PENDING = unitStatement(
  `${closeReservation(
    { status: statusAfterSql(sqliteCharge), charged: sqliteCharge, at: param('at'), requestId: param('requestId') },
    { whileStatus: 'pending', from: ' FROM wallets w', joined: 'w.address = reservations.wallet' },
  )} RETURNING wallet, amount_usdc, api_key_id, created_at, charged_usdc, (SELECT locked_usdc FROM wallets WHERE address = reservations.wallet) AS wallet_locked`,
);
// A finish's write-unit statements. The late charge and the sweeper write the same ones (exported
// for them), so a column or an aggregate changed here changes in every finish.
export const RELEASE_AND_CHARGE = unitStatement(`${releaseAndCharge(boundOperands())} RETURNING balance_usdc`);
export const CHARGE_ENTRY = unitStatement(chargeEntry(VALUES, boundOperands()));
export const USAGE_ROW = unitStatement(usageRow(VALUES, boundOperands()));
export const ADD_TO_TOTALS = unitStatement(addToTotals(VALUES, boundOperands()));
export const FINISH_IN_BUCKETS = unitStatement(finishInBuckets(boundOperands(), BOUND_BUCKETS));
export const ADD_TO_DAILY = unitStatement(addToDaily(VALUES, boundOperands()));
// The same three as counters, for the finish's unit on SQLite: a batch's finishes on one key add to
// its buckets, totals and day once (batch-counters.ts); each still counts one usage row per finish.
const totalsSums = ['requests', 'promptTokens', 'completionTokens', 'reasoningTokens', 'cachedTokens', 'charged', 'providerCost'];
const COUNT_IN_TOTALS = counterStatement(addToTotals(VALUES, boundOperands(), param('requests')), totalsSums);
const COUNT_FINISH_IN_BUCKETS = counterStatement(finishInBuckets(boundOperands(), BOUND_BUCKETS), ['charged', 'released']);
const COUNT_IN_DAILY = counterStatement(addToDaily(VALUES, boundOperands(), param('requests')), ['requests', 'promptTokens', 'completionTokens', 'charged']);

// PostgreSQL does the whole finish in one statement, for the same reason as the reserve: one round
// trip of its group-commit batch instead of seven. `pending` locks the reservation and its
// wallet (FOR UPDATE waits for a concurrent finish, then re-checks `status = 'pending'` against the
// row it committed, so the loser finds nothing) and computes the charge from the locked, current
// wallet row. Every other sub-statement reads only `pending`, and each row is written once.
// `pending`'s columns are named apart from the tables' (key_id, reserved_at), so the fragments'
// unqualified columns always mean the table written.
const p = { wallet: 'p.wallet', reserved: 'p.reserved', keyId: 'p.key_id', charged: 'p.charged' };
const FROM_PENDING = ' FROM pending p';
const figures = {
  apiKeyId: param('apiKeyId'),
  promptTokens: param('promptTokens'),
  completionTokens: param('completionTokens'),
  reasoningTokens: param('reasoningTokens'),
  cachedTokens: param('cachedTokens'),
  charged: p.charged,
  providerCost: bookedCostSql(p.charged, `${param('reportedCost')}::bigint`),
};
const at = param('at');
const FINISH_IN_ONE_STATEMENT = postgresStatement(`WITH pending AS (
    SELECT r.wallet, r.amount_usdc AS reserved, r.api_key_id AS key_id, r.created_at AS reserved_at,
           ${payableSql(param('asked'))} AS charged
    FROM reservations r JOIN wallets w ON w.address = r.wallet
    WHERE r.request_id = ${param('requestId')} AND r.status = 'pending'
    FOR UPDATE
  ), closed AS (
    ${closeReservation({ status: statusAfterSql(p.charged), charged: p.charged, at, requestId: param('requestId') }, { from: FROM_PENDING })}
  ), released AS (
    ${releaseAndCharge({ released: p.reserved, charged: p.charged, at, wallet: p.wallet }, FROM_PENDING)}
    RETURNING balance_usdc
  ), charge AS (
    ${chargeEntry(selectFrom('pending p', `${p.charged} > 0`), { wallet: p.wallet, amount: `-${p.charged}`, requestId: param('requestId'), note: param('model'), at })}
  ), usage AS (
    ${usageRow(selectFrom('pending p'), {
      ...figures,
      requestId: param('requestId'),
      wallet: p.wallet,
      model: param('model'),
      provider: param('provider'),
      deployment: param('deployment'),
      status: param('status'),
      latencyMs: param('latencyMs'),
      estimated: param('estimated'),
      at,
    })}
  ), totals AS (
    ${addToTotals(selectFrom('pending p'), figures)}
  ), spend AS (
    ${finishInBuckets({ charged: p.charged, released: p.reserved, apiKeyId: p.keyId }, bucketsOfColumn('p.reserved_at'), FROM_PENDING)}
  ), daily AS (
    ${addToDaily(selectFrom('pending p'), { ...figures, wallet: p.wallet, day: param('day') })}
  )
  SELECT p.charged, r.balance_usdc FROM pending p, released r`);

/**
 * Finishes a reservation: charges `chargeUsdc` (0 voids it), releases the lock, writes the
 * request's usage row and adds it to its key's totals and its day's, all in one unit. The reservation's status
 * change is the exactly-once guard: a second settle or void of the same request changes nothing.
 */
export async function finishReservation(
  storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>,
  requestId: string,
  chargeUsdc: number,
  usage: UsageRecord,
  now = Date.now(),
): Promise<SettleOutcome> {
  assertAmount(`request ${requestId}'s charge`, chargeUsdc);
  const notApplied: SettleOutcome = { applied: false, chargedUsdc: 0, shortfallUsdc: 0, balanceUsdc: null };
  const outcome = (charged: number, balanceUsdc: number): SettleOutcome => {
    // A finish takes at most what it was asked, and never more than the wallet held.
    assertMoney(charged >= 0 && charged <= chargeUsdc, () => `request ${requestId}: charged ${charged} of ${chargeUsdc} asked`);
    assertMoney(balanceUsdc >= 0, () => `request ${requestId}: the balance is ${balanceUsdc} after its finish`);
    return { applied: true, chargedUsdc: charged, shortfallUsdc: chargeUsdc - charged, balanceUsdc };
  };
  if (storage.engine === 'postgres') {
    const request = { ...usageFigures(usage), requestId, at: now, day: usageDay(now) };
    const params = FINISH_IN_ONE_STATEMENT.params({ ...request, asked: chargeUsdc, reportedCost: usage.providerCostUsdc });
    const row = await storage.writeUnit((tx) => tx.get<{ charged: number; balance_usdc: number }>(FINISH_IN_ONE_STATEMENT.sql, params), {
      wallet: usage.wallet,
      oneStatement: true,
      nothingAfterStatement: true,
    });
    return row ? outcome(Number(row.charged), Number(row.balance_usdc)) : notApplied;
  }
  return storage.writeUnit(
    async (tx) => {
      const r = await CLOSE_PENDING.get<{
        wallet: string;
        amount_usdc: number;
        api_key_id: number | null;
        created_at: number;
        charged_usdc: number;
        wallet_locked: number;
      }>(tx, {
        asked: chargeUsdc,
        at: now,
        requestId,
      });
      if (!r) return notApplied;
      const reserved = Number(r.amount_usdc);
      const charged = Number(r.charged_usdc);
      // Precondition: the reservation is part of its wallet's lock (the rest is other requests').
      assertMoney(reserved <= Number(r.wallet_locked), () => `request ${requestId}: reserved ${reserved} but its wallet locks ${r.wallet_locked}`);
      const othersLocked = Number(r.wallet_locked) - reserved;
      // One values object, written out, for every statement of the unit (each binds the names it
      // uses): a spread copy per statement cost about a tenth of SQLite's reserve+settle throughput.
      const v = {
        requestId,
        at: now,
        day: usageDay(now),
        wallet: r.wallet,
        apiKeyId: usage.apiKeyId,
        model: usage.model,
        provider: usage.provider,
        deployment: usage.deployment ?? null,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        reasoningTokens: usage.reasoningTokens,
        cachedTokens: usage.cachedTokens,
        status: usage.status,
        latencyMs: usage.latencyMs,
        estimated: usage.estimated ? 1 : 0,
        charged,
        reserved,
        released: reserved,
        providerCost: bookedCost(charged, usage.providerCostUsdc),
        amount: -charged,
        note: usage.model,
        requests: 1,
      };
      const after = await RELEASE_AND_CHARGE.get<{ balance_usdc: number }>(tx, v);
      if (charged > 0) await CHARGE_ENTRY.run(tx, v);
      await USAGE_ROW.run(tx, v);
      await COUNT_IN_TOTALS.add(tx, v);
      if (r.api_key_id !== null) {
        // The bucket rows are the reservation's key's (its api_key_id), as the reserve counted them.
        await COUNT_FINISH_IN_BUCKETS.add(tx, { charged, released: reserved, apiKeyId: Number(r.api_key_id), ...bucketValues(Number(r.created_at)) });
      }
      await COUNT_IN_DAILY.add(tx, v);
      // The charge left the other requests' locks covered.
      assertWalletFloor(r.wallet, Number(after!.balance_usdc), othersLocked);
      return outcome(charged, Number(after!.balance_usdc));
    },
    { wallet: usage.wallet },
  );
}
