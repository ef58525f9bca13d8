import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { applyMovement } from '../movements.ts';
import { lockedHoldWallet } from './locked-hold-wallet.ts';

/**
 * The money of an x402 `upto` payment, as two ledger operations of their own:
 * - `holdUpto`: the signed maximum enters the payer's hold wallet (one `upto_hold` entry);
 * - `releaseUpto`: once the request's charge is fixed, what it did not spend leaves it again (one
 *   `upto_release` entry, written even when nothing is left, so every fixed charge has one).
 * Both reference `payment:<id>`: the unique index on (kind, reference) lets a payment be held once
 * and released once, whatever the callers do. The request in between reserves and is finished on
 * the hold wallet by the ordinary operations, so hold − release = its charge.
 *
 * The state write that goes with each operation (the payment `holding`, then past it) comes first
 * in the same transaction, and each operation checks it is there: money never moves for a payment
 * whose state says otherwise, and a crash between the two leaves neither.
 */

/**
 * The ledger wallet an upto payment's maximum is held in while its request runs. Not an address
 * (no key, SIWE or SIWX can name it), so only that request spends it; one per payer, holding at
 * most one payment at a time (the partial unique index of migration 013).
 */
export const uptoHoldWallet = (payer: string) => `${payer.toLowerCase()}#upto`;

/** Whether a ledger wallet is an upto hold wallet (no address ends so). */
export const isUptoHoldWallet = (wallet: string) => wallet.endsWith('#upto');

/** The reference of both entries of an upto payment. */
export const uptoEntryReference = (paymentId: string) => `payment:${paymentId}`;

/** A money invariant of an upto hold does not hold: a bug or a tampered row. It rolls the transaction back. */
export class HoldInvariantError extends Error {}

function assertHold(condition: boolean, message: string): asserts condition {
  if (!condition) throw new HoldInvariantError(`upto hold invariant: ${message}`);
}

interface HeldPayment {
  id: string;
  payer: string;
  amount_usdc: number;
  status: string;
  upto_state: string | null;
}

async function heldPayment(trx: Kysely<Database>, id: string): Promise<HeldPayment> {
  const p = await trx.selectFrom('payments').select(['id', 'payer', 'amount_usdc', 'status', 'upto_state']).where('id', '=', id).executeTakeFirst();
  assertHold(p !== undefined, `no payment ${id}`);
  return { ...p, amount_usdc: Number(p.amount_usdc) };
}

/** The payer's hold wallet, locked (see lockedHoldWallet). */
const lockedHold = (trx: Kysely<Database>, payer: string, now: number) => lockedHoldWallet(trx, uptoHoldWallet(payer), now);

/** Credits payment `id`'s maximum to its payer's hold wallet. Its row must already say `credited`/`holding` in this transaction. */
export async function holdUpto(trx: Kysely<Database>, id: string, note: string, now: number): Promise<void> {
  const p = await heldPayment(trx, id);
  const state = `${p.status}/${p.upto_state}`;
  assertHold(state === 'credited/holding', `payment ${id} is ${state}, not credited/holding: nothing is held for it`);
  assertHold(Number.isSafeInteger(p.amount_usdc) && p.amount_usdc > 0, `payment ${id} holds ${p.amount_usdc} micro-USDC; a maximum is positive`);
  const before = await lockedHold(trx, p.payer, now);
  // One open upto payment per payer, and a fixed one leaves its hold wallet at 0: anything there
  // now would be another payment's money, spendable by this request.
  const wallet = uptoHoldWallet(p.payer);
  assertHold(before.balance === 0 && before.locked === 0, `${wallet} holds ${before.balance} (${before.locked} locked) before payment ${id}'s hold`);
  await applyMovement(trx, { wallet, kind: 'upto_hold', amountUsdc: p.amount_usdc, reference: uptoEntryReference(id), note }, now);
}

export type HoldMeasure = { kind: 'running' } | { kind: 'spent'; chargeUsdc: number; unspentUsdc: number };

/**
 * What payment `id`'s request spent of its hold: `running` while a reservation on the hold wallet
 * is open (a stream, or a settle spooled during an outage). The wallet stays locked until the
 * transaction ends, so the release that follows moves exactly the `unspentUsdc` read here.
 */
export async function measureHold(trx: Kysely<Database>, id: string, now: number): Promise<HoldMeasure> {
  const p = await heldPayment(trx, id);
  const hold = await lockedHold(trx, p.payer, now);
  if (hold.locked > 0) return { kind: 'running' };
  const within = hold.balance >= 0 && hold.balance <= p.amount_usdc;
  assertHold(within, `${uptoHoldWallet(p.payer)} holds ${hold.balance}, outside 0..${p.amount_usdc} (payment ${id}'s maximum)`);
  return { kind: 'spent', chargeUsdc: p.amount_usdc - hold.balance, unspentUsdc: hold.balance };
}

/**
 * Takes what payment `id`'s request did not spend back out of the hold wallet, which is then at 0.
 * Its row must already have left `holding` in this transaction, and `unspentUsdc` be what
 * measureHold read. A second release of the same payment is refused (a HoldInvariantError here,
 * and the unique index (kind, reference) under any race).
 */
export async function releaseUpto(trx: Kysely<Database>, id: string, unspentUsdc: number, now: number): Promise<void> {
  const p = await heldPayment(trx, id);
  assertHold(p.upto_state !== null && p.upto_state !== 'holding', `payment ${id} is ${p.upto_state}: only a payment whose charge is fixed is released`);
  const within = Number.isSafeInteger(unspentUsdc) && unspentUsdc >= 0 && unspentUsdc <= p.amount_usdc;
  assertHold(within, `release of ${unspentUsdc} for a maximum of ${p.amount_usdc}`);
  const wallet = uptoHoldWallet(p.payer);
  const reference = uptoEntryReference(id);
  const earlier = await trx.selectFrom('ledger_entries').select('id').where('kind', '=', 'upto_release').where('reference', '=', reference).executeTakeFirst();
  assertHold(earlier === undefined, `payment ${id} was released already`);
  const before = await lockedHold(trx, p.payer, now);
  const exact = before.balance === unspentUsdc && before.locked === 0;
  assertHold(exact, `${wallet} holds ${before.balance} (${before.locked} locked), not the ${unspentUsdc} to release`);
  const note = 'x402 upto: the unspent part of the maximum, released';
  if (unspentUsdc > 0) await applyMovement(trx, { wallet, kind: 'upto_release', amountUsdc: -unspentUsdc, reference, note }, now);
  else await trx.insertInto('ledger_entries').values({ wallet, kind: 'upto_release', amount_usdc: 0, reference, note, created_at: now }).execute();
  const after = await lockedHold(trx, p.payer, now);
  assertHold(after.balance === 0 && after.locked === 0, `${wallet} holds ${after.balance} (${after.locked} locked) after payment ${id}'s release`);
}
