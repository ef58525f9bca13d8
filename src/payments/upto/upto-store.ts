import type { Kysely } from 'kysely';
import type { PaymentPayload } from '@x402/core/types';
import { holdUpto, measureHold, releaseUpto, uptoHoldWallet } from '../../ledger/operations/upto-hold.ts';
import { isUniqueViolation } from '../../storage/constraint-errors.ts';
import type { Database, UptoState } from '../../storage/schema.ts';
import { findPayment, type PaymentRow } from '../payment-store.ts';
import { atomicAmount } from '../offers.ts';
import { transition, transitionOrThrow } from '../states.ts';

/**
 * The database steps of an x402 `upto` payment on pay-per-request (migration 013 says what the
 * columns hold). Every step is one conditional update, so a live request, the reconciler and an
 * operator's retry racing on the same payment each move it at most once.
 *
 * The money is the hold's own ledger operations (ledger/operations/upto-hold.ts): the signed
 * maximum is held in the payer's hold wallet (uptoHoldWallet), the request reserves and is finished
 * there by the ordinary ledger operations, and what it did not use is released when the charge is
 * fixed: the hold wallet is at 0 again and hold − release equals what the gateway settles on chain.
 */

export { uptoHoldWallet };

/** The reference of a release that ledger rows older than migration 015 record as an `adjustment` (ledger/upto-check.ts reads both forms). */
export const uptoReleaseReference = (paymentId: string) => `upto-release:${paymentId}`;

/** The refusal reason of an upto payment refused because its payer has one open already. */
export const UPTO_BUSY = 'another upto payment of this wallet is still open (running, settling or unsettled); send this one again once it is settled';

export type HoldOutcome = { kind: 'held'; payment: PaymentRow } | { kind: 'busy' };

/**
 * The verified payment `id` (status pending) now holds its maximum for its request: credited to the
 * hold wallet in the transaction that marks it `credited`/`holding` and stores its payload. `busy`
 * when the payer already has an open upto payment (the unique index refused this one): nothing was
 * credited, and the row is failed with UPTO_BUSY (the same payment, sent again later, reopens it).
 */
export async function holdMaximum(db: Kysely<Database>, id: string, payload: PaymentPayload, now = Date.now()): Promise<HoldOutcome> {
  try {
    await db.transaction().execute(async (trx) => {
      await transitionOrThrow(trx, id, 'pending', 'holding', { set: { upto_payload: JSON.stringify(payload), credited_at: now, updated_at: now } });
      const p = await findPayment(trx, id);
      await holdUpto(trx, id, `x402 upto hold ${p.network}`, now);
    });
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    await transition(db, id, 'pending', 'failed', { set: { failure_reason: UPTO_BUSY, updated_at: now } });
    return { kind: 'busy' };
  }
  return { kind: 'held', payment: await findPayment(db, id) };
}

/**
 * The request is finished (its reservation settled or voided): its charge is what the hold wallet
 * lost. In one transaction the amount to settle is written (before anything is sent) and the unspent
 * rest is released. `running` while the reservation is still open (a stream, or a settle spooled
 * during a database outage): nothing changes, and a later pass tries again.
 */
export async function fixCharge(db: Kysely<Database>, id: string, now = Date.now()): Promise<'fixed' | 'running' | 'not-holding'> {
  return db.transaction().execute(async (trx) => {
    const p = await findPayment(trx, id);
    if (p.state !== 'holding') return 'not-holding';
    const hold = await measureHold(trx, id, now);
    if (hold.kind === 'running') return 'running';
    const settleAtomic = atomicAmount(hold.chargeUsdc, p.token_decimals!).toString();
    const fixed = await transition(trx, id, 'holding', 'settling', { set: { settle_amount_atomic: settleAtomic, updated_at: now } });
    if (fixed === 'lost-race') return 'not-holding';
    await releaseUpto(trx, id, hold.unspentUsdc, now);
    return 'fixed';
  });
}

/** The settling transaction's hash, recorded before it is broadcast (the facilitator's onBroadcast). */
export async function recordUptoTx(db: Kysely<Database>, id: string, txHash: string, now = Date.now()): Promise<void> {
  await db
    .updateTable('payments')
    .set({ tx_hash: txHash.toLowerCase(), updated_at: now })
    .where('id', '=', id)
    .where('state', 'in', ['settling', 'unsettled'])
    .execute();
}

/** Thrown from the hash write before a broadcast when the send claim was lost: nothing is broadcast. */
export class SendClaimLost extends Error {}

/**
 * The hash of a send made under the claim `claimed` (the row as claimSend left it), written before
 * its broadcast only while that claim still holds: the row unchanged since (no other claim, no
 * hash). Otherwise another sender owns the charge, and throwing here stops this broadcast
 * (relayer-send.ts calls this after signing, before sending), so one authorization is sent once.
 */
export async function recordClaimedTx(db: Kysely<Database>, claimed: PaymentRow, txHash: string, now = Date.now()): Promise<void> {
  const moved = await db
    .updateTable('payments')
    .set({ tx_hash: txHash.toLowerCase(), updated_at: Math.max(now, Number(claimed.updated_at) + 1) })
    .where('id', '=', claimed.id)
    .where('state', '=', 'settling')
    .where('updated_at', '=', claimed.updated_at)
    .where('tx_hash', 'is', null)
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) !== 1) throw new SendClaimLost(`upto payment ${claimed.id}: another sender claimed its settle; this one is not broadcast`);
}

/** What arrived on chain (0 for a charge of 0, which sends nothing): the payment is settled. */
export async function closeSettled(db: Kysely<Database>, id: string, onchainAtomic: bigint, txHash: string | null, now = Date.now()): Promise<void> {
  const set = { onchain_amount_atomic: onchainAtomic.toString(), tx_hash: txHash?.toLowerCase() ?? null, failure_reason: null, updated_at: now };
  await transition(db, id, ['settling', 'unsettled'], 'settled', { set });
}

/** The settle failed after the answer was delivered: recorded with its reason. True when this call moved it. */
export async function markUnsettled(db: Kysely<Database>, id: string, reason: string, now = Date.now()): Promise<boolean> {
  return (await transition(db, id, 'settling', 'unsettled', { set: { failure_reason: reason.slice(0, 200), updated_at: now } })) === 'moved';
}

/**
 * `tollgate admin upto retry`: an unsettled (or written-off) payment is settling again, to be sent
 * again for the same amount. False when it was not in `from`, or (from written_off) when its payer
 * has another open upto payment meanwhile (the unique index: one open at a time).
 */
export async function reopenUnsettled(db: Kysely<Database>, id: string, now = Date.now(), from: UptoState = 'unsettled'): Promise<boolean> {
  try {
    return (await transition(db, id, from, 'settling', { set: { updated_at: now } })) === 'moved';
  } catch (err) {
    if (isUniqueViolation(err)) return false;
    throw err;
  }
}

/** A written-off payment whose charge arrived on chain after all: settled, the write-off undone. True when this call moved it. */
export async function settleWrittenOff(db: Kysely<Database>, id: string, onchainAtomic: bigint, txHash: string, now = Date.now()): Promise<boolean> {
  const set = { onchain_amount_atomic: onchainAtomic.toString(), tx_hash: txHash.toLowerCase(), failure_reason: null, updated_at: now };
  return (await transition(db, id, 'written_off', 'settled', { set })) === 'moved';
}

/** `tollgate admin upto write-off`: the loss is recorded with the operator's reason, and the payer is free again. */
export async function writeOff(db: Kysely<Database>, id: string, reason: string, now = Date.now()): Promise<boolean> {
  const set = { failure_reason: `written off: ${reason}`.slice(0, 200), updated_at: now };
  return (await transition(db, id, 'unsettled', 'written_off', { set })) === 'moved';
}

/** The payer's open upto payment (holding, settling or unsettled), if any: at most one, by the index. */
export function openUptoOf(db: Kysely<Database>, payer: string): Promise<PaymentRow | undefined> {
  return db
    .selectFrom('payments')
    .selectAll()
    .where('payer', '=', payer.toLowerCase())
    .where('upto_state', 'in', ['holding', 'settling', 'unsettled'])
    .executeTakeFirst();
}

/** Upto payments in `states` last touched before `before` (ms), oldest first: the reconciler's work list. */
export function uptoPaymentsIn(db: Kysely<Database>, states: UptoState[], before: number, limit = 100): Promise<PaymentRow[]> {
  return db.selectFrom('payments').selectAll().where('upto_state', 'in', states).where('updated_at', '<', before).orderBy('updated_at').limit(limit).execute();
}

/**
 * The right to send a `settling` payment's charge (again): taken by exactly one of the gateways
 * that read the row as `p` (its last touch and its hash unchanged since), so two instances'
 * reconcilers, or a reconciler and an operator's retry, never both send. A dropped transaction's
 * hash is cleared with it: if that transaction comes back and lands after all, the chain's
 * transfer log still names it (inspectOnChain), and the new send then reverts on Permit2's nonce.
 */
export async function claimSend(db: Kysely<Database>, p: PaymentRow, now = Date.now()): Promise<boolean> {
  const moved = await db
    .updateTable('payments')
    .set({ tx_hash: null, updated_at: Math.max(now, Number(p.updated_at) + 1) })
    .where('id', '=', p.id)
    .where('state', '=', 'settling')
    .where('updated_at', '=', p.updated_at)
    .where('tx_hash', p.tx_hash === null ? 'is' : '=', p.tx_hash)
    .executeTakeFirst();
  return Number(moved.numUpdatedRows) === 1;
}

/** Unsettled payments whose authorization is valid past `validPast` (seconds), untouched since `before` (ms). */
export function stillCollectable(db: Kysely<Database>, validPast: number, before: number, limit = 100): Promise<PaymentRow[]> {
  return db
    .selectFrom('payments')
    .selectAll()
    .where('upto_state', '=', 'unsettled')
    .where('valid_before', '>', validPast)
    .where('updated_at', '<', before)
    .orderBy('updated_at')
    .limit(limit)
    .execute();
}

/** Settling payments untouched since `before`: stuck (ledger/upto-check.ts, UPTO_SETTLE_STUCK_MS). */
export async function countSettlingSince(db: Kysely<Database>, before: number): Promise<number> {
  const row = await db
    .selectFrom('payments')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('upto_state', '=', 'settling')
    .where('updated_at', '<', before)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}
