import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { applyMovement } from '../movements.ts';
import { lockedHoldWallet } from './locked-hold-wallet.ts';

/**
 * The money of one request paid through an x402 `batch-settlement` channel, as two ledger
 * operations of their own (docs/DECISIONS.md, "Batch-settlement channels in the ledger"):
 * - `holdChannelRequest`: the request's ceiling (what its voucher adds) enters the channel's hold
 *   wallet (one `channel_hold` entry);
 * - `releaseChannelRequest`: once the request's charge is fixed, what it did not spend leaves it
 *   again (one `channel_release` entry, written even for 0).
 * Both reference `channel-request:<request id>`: the unique index on (kind, reference) lets a
 * request be held once and released once. The request in between reserves and is finished on the
 * hold wallet by the ordinary operations, so hold − release = its charge, and summed over a channel
 * = the channel's charged amount since the gateway first saw it (ledger/channel-check.ts).
 *
 * The channel row's write that goes with each (the request made pending on the channel, then
 * committed) comes first in the same transaction, and each operation checks it is there.
 */

/** The ledger wallet a channel's request ceilings are held in. A channel id is 32 bytes: no key, SIWE or SIWX names it. */
export const channelHoldWallet = (channelId: string) => `${channelId.toLowerCase()}#channel`;

export const isChannelHoldWallet = (wallet: string) => wallet.endsWith('#channel');

/** The reference of both entries of one request paid through a channel. */
export const channelEntryReference = (requestId: string) => `channel-request:${requestId}`;

/** A money invariant of a channel hold does not hold: a bug or a tampered row. It rolls the transaction back. */
export class ChannelHoldInvariantError extends Error {}

function assertHold(condition: boolean, message: string): asserts condition {
  if (!condition) throw new ChannelHoldInvariantError(`channel hold invariant: ${message}`);
}

interface PendingOnChannel {
  pending_request: string | null;
  pending_hold_usdc: number | null;
}

async function channelRow(trx: Kysely<Database>, channelId: string): Promise<PendingOnChannel> {
  const row = await trx
    .selectFrom('channels')
    .select(['pending_request', 'pending_hold_usdc'])
    .where('channel_id', '=', channelId.toLowerCase())
    .executeTakeFirst();
  assertHold(row !== undefined, `no channel ${channelId}`);
  return { pending_request: row.pending_request, pending_hold_usdc: row.pending_hold_usdc === null ? null : Number(row.pending_hold_usdc) };
}

/** The channel's hold wallet, locked (see lockedHoldWallet). */
const lockedHold = (trx: Kysely<Database>, channelId: string, now: number) => lockedHoldWallet(trx, channelHoldWallet(channelId), now);

/** Credits `ceilingUsdc` for request `requestId` to the channel's hold wallet. The channel row must already name it pending, in this transaction. */
export async function holdChannelRequest(trx: Kysely<Database>, channelId: string, requestId: string, ceilingUsdc: number, now: number): Promise<void> {
  const row = await channelRow(trx, channelId);
  assertHold(row.pending_request === requestId, `channel ${channelId} is not pending request ${requestId}: nothing is held for it`);
  assertHold(Number.isSafeInteger(ceilingUsdc) && ceilingUsdc > 0, `a ceiling of ${ceilingUsdc} micro-USDC; a ceiling is positive`);
  assertHold(row.pending_hold_usdc === ceilingUsdc, `channel ${channelId} records a hold of ${row.pending_hold_usdc}, not ${ceilingUsdc}`);
  // One request per channel at a time (its lease), and a finished one leaves the wallet at 0:
  // anything there now would be another request's money, spendable by this one.
  const before = await lockedHold(trx, channelId, now);
  assertHold(
    before.balance === 0 && before.locked === 0,
    `${channelHoldWallet(channelId)} holds ${before.balance} (${before.locked} locked) before ${requestId}`,
  );
  const note = 'x402 batch-settlement: the request ceiling its voucher signs';
  await applyMovement(
    trx,
    { wallet: channelHoldWallet(channelId), kind: 'channel_hold', amountUsdc: ceilingUsdc, reference: channelEntryReference(requestId), note },
    now,
  );
}

export type ChannelHoldMeasure = { kind: 'running' } | { kind: 'spent'; chargeUsdc: number; unspentUsdc: number };

/**
 * What the channel's pending request spent of its ceiling: `running` while a reservation on the hold
 * wallet is open (a stream, or a settle spooled during an outage). The wallet stays locked until
 * the transaction ends, so the release that follows moves exactly the `unspentUsdc` read here.
 */
export async function measureChannelHold(trx: Kysely<Database>, channelId: string, now: number): Promise<ChannelHoldMeasure> {
  const row = await channelRow(trx, channelId);
  assertHold(row.pending_request !== null && row.pending_hold_usdc !== null, `channel ${channelId} has no pending request to measure`);
  const hold = await lockedHold(trx, channelId, now);
  if (hold.locked > 0) return { kind: 'running' };
  const ceiling = row.pending_hold_usdc;
  assertHold(hold.balance >= 0 && hold.balance <= ceiling, `${channelHoldWallet(channelId)} holds ${hold.balance}, outside 0..${ceiling}`);
  return { kind: 'spent', chargeUsdc: ceiling - hold.balance, unspentUsdc: hold.balance };
}

/**
 * Takes what request `requestId` did not spend back out of the hold wallet, which is then at 0.
 * The channel row must already have let go of the request in this transaction, and `unspentUsdc`
 * be what measureChannelHold read. A second release of one request is refused.
 */
export async function releaseChannelRequest(trx: Kysely<Database>, channelId: string, requestId: string, unspentUsdc: number, now: number): Promise<void> {
  const row = await channelRow(trx, channelId);
  assertHold(row.pending_request !== requestId, `channel ${channelId} still has ${requestId} pending: commit the channel before the release`);
  const reference = channelEntryReference(requestId);
  const wallet = channelHoldWallet(channelId);
  const entries = await trx
    .selectFrom('ledger_entries')
    .select(['kind', 'amount_usdc'])
    .where('reference', '=', reference)
    .where('wallet', '=', wallet)
    .execute();
  const held = entries.find((e) => e.kind === 'channel_hold');
  assertHold(held !== undefined, `request ${requestId} holds nothing on ${wallet}`);
  assertHold(!entries.some((e) => e.kind === 'channel_release'), `request ${requestId} was released already`);
  const within = Number.isSafeInteger(unspentUsdc) && unspentUsdc >= 0 && unspentUsdc <= Number(held.amount_usdc);
  assertHold(within, `release of ${unspentUsdc} for a ceiling of ${held.amount_usdc}`);
  const before = await lockedHold(trx, channelId, now);
  assertHold(
    before.balance === unspentUsdc && before.locked === 0,
    `${wallet} holds ${before.balance} (${before.locked} locked), not the ${unspentUsdc} to release`,
  );
  const note = 'x402 batch-settlement: the unspent part of the ceiling, released';
  if (unspentUsdc > 0) await applyMovement(trx, { wallet, kind: 'channel_release', amountUsdc: -unspentUsdc, reference, note }, now);
  else await trx.insertInto('ledger_entries').values({ wallet, kind: 'channel_release', amount_usdc: 0, reference, note, created_at: now }).execute();
}
