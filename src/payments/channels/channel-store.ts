import type { Kysely, Selectable } from 'kysely';
import type { ChannelTable, ChannelTransferTable, Database } from '../../storage/schema.ts';
import type { ChannelConfig, ChannelSnapshot } from './channel-types.ts';

/**
 * The gateway's own record of each x402 `batch-settlement` channel (migration 018): the state the
 * spec asks the server to keep, the per-channel lease that serialises its requests across every
 * instance sharing the database, and what went in and out on chain through this gateway. Every
 * write is one conditional statement (or one transaction), so two instances racing on a channel
 * each move it at most once. The request path is src/payments/paid-request/batch-settlement.ts;
 * the background claims and settles use listUnclaimed, markClaimed and recordTransfer.
 */

export type ChannelRow = Selectable<ChannelTable>;

const toNumbers = (row: ChannelRow): ChannelRow => ({
  ...row,
  withdraw_delay: Number(row.withdraw_delay),
  charged_usdc: Number(row.charged_usdc),
  baseline_usdc: Number(row.baseline_usdc),
  signed_max_usdc: row.signed_max_usdc === null ? null : Number(row.signed_max_usdc),
  balance_usdc: Number(row.balance_usdc),
  total_claimed_usdc: Number(row.total_claimed_usdc),
  withdraw_requested_at: Number(row.withdraw_requested_at),
  synced_at: Number(row.synced_at),
  deposited_usdc: Number(row.deposited_usdc),
  refunded_usdc: Number(row.refunded_usdc),
  last_request_at: row.last_request_at === null ? null : Number(row.last_request_at),
  lease_until: row.lease_until === null ? null : Number(row.lease_until),
  pending_max_usdc: row.pending_max_usdc === null ? null : Number(row.pending_max_usdc),
  pending_hold_usdc: row.pending_hold_usdc === null ? null : Number(row.pending_hold_usdc),
  created_at: Number(row.created_at),
  updated_at: Number(row.updated_at),
});

export async function findChannel(db: Kysely<Database>, channelId: string): Promise<ChannelRow | undefined> {
  const row = await db.selectFrom('channels').selectAll().where('channel_id', '=', channelId.toLowerCase()).executeTakeFirst();
  return row ? toNumbers(row) : undefined;
}

/** The channel's config as stored (addresses lower-case): what its id was computed from. */
export const configOf = (row: ChannelRow): ChannelConfig => ({
  payer: row.payer as `0x${string}`,
  payerAuthorizer: row.payer_authorizer as `0x${string}`,
  receiver: row.receiver as `0x${string}`,
  receiverAuthorizer: row.receiver_authorizer as `0x${string}`,
  token: row.token as `0x${string}`,
  withdrawDelay: row.withdraw_delay,
  salt: row.salt as `0x${string}`,
});

/** The mirrored on-chain fields as the spec's `channelState`, with the server's charged amount. */
export const snapshotOf = (row: ChannelRow): ChannelSnapshot => ({
  channelId: row.channel_id as `0x${string}`,
  balance: row.balance_usdc,
  totalClaimed: row.total_claimed_usdc,
  withdrawRequestedAt: row.withdraw_requested_at,
  refundNonce: row.refund_nonce,
});

/**
 * Records a channel first seen with its on-chain state `snapshot` (read by the facilitator for the
 * request that brought it). The baseline is the chain's totalClaimed, never the client's voucher
 * (the spec's "server state loss" rule): what was charged before and not claimed is not ours to
 * know. A row already there (another instance recorded it first) is kept as it is.
 */
export async function recordChannel(
  db: Kysely<Database>,
  c: { channelId: string; network: string; config: ChannelConfig; snapshot: ChannelSnapshot },
  now: number,
): Promise<ChannelRow> {
  const { config, snapshot } = c;
  const id = c.channelId.toLowerCase();
  await db
    .insertInto('channels')
    .values({
      channel_id: id,
      network: c.network,
      payer: config.payer.toLowerCase(),
      payer_authorizer: config.payerAuthorizer.toLowerCase(),
      receiver: config.receiver.toLowerCase(),
      receiver_authorizer: config.receiverAuthorizer.toLowerCase(),
      token: config.token.toLowerCase(),
      withdraw_delay: config.withdrawDelay,
      salt: config.salt.toLowerCase(),
      charged_usdc: snapshot.totalClaimed,
      baseline_usdc: snapshot.totalClaimed,
      signed_max_usdc: null,
      signature: null,
      balance_usdc: snapshot.balance,
      total_claimed_usdc: snapshot.totalClaimed,
      withdraw_requested_at: snapshot.withdrawRequestedAt,
      refund_nonce: snapshot.refundNonce,
      synced_at: now,
      last_request_at: null,
      lease_owner: null,
      lease_until: null,
      pending_request: null,
      pending_max_usdc: null,
      pending_signature: null,
      pending_hold_usdc: null,
      last_refund_signature: null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.column('channel_id').doNothing())
    .execute();
  const row = await findChannel(db, id);
  if (!row) throw new Error(`channel ${id} vanished right after it was recorded`);
  return row;
}

/** The lease owner prefix of a channel held for a cooperative refund in flight (`refund-tx:<hash>`, refund-in-flight.ts). */
export const REFUND_LEASE_PREFIX = 'refund-tx:';

/**
 * The channel's lease for `owner` until `now + leaseMs`: taken by compare-and-set, so of the
 * requests (on any instance) that try at once exactly one gets it. False while another owner's
 * lease runs. An expired lease (a request's) is taken over: its owner died or lost the database, and the caller
 * finishes the request it left pending (channel-finish.ts) before running its own.
 */
export async function takeLease(db: Kysely<Database>, channelId: string, owner: string, now: number, leaseMs: number): Promise<boolean> {
  const taken = await db
    .updateTable('channels')
    .set({ lease_owner: owner, lease_until: now + leaseMs, updated_at: now })
    .where('channel_id', '=', channelId.toLowerCase())
    // A refund's lease (refund-in-flight.ts) is never taken by time: its transaction can still be mined
    // however late, and only reading its fate gives the channel back.
    .where((eb) => eb.or([eb('lease_owner', 'is', null), eb.and([eb('lease_until', '<', now), eb('lease_owner', 'not like', `${REFUND_LEASE_PREFIX}%`)])]))
    .executeTakeFirst();
  return Number(taken.numUpdatedRows) === 1;
}

/** Renews `owner`'s lease (a long stream); false when it was lost (it expired and another request took it). */
export async function renewLease(db: Kysely<Database>, channelId: string, owner: string, now: number, leaseMs: number): Promise<boolean> {
  const renewed = await db
    .updateTable('channels')
    .set({ lease_until: now + leaseMs })
    .where('channel_id', '=', channelId.toLowerCase())
    .where('lease_owner', '=', owner)
    .executeTakeFirst();
  return Number(renewed.numUpdatedRows) === 1;
}

/**
 * Gives `owner`'s lease (taken over from an expired one) back to `requestId`, the channel's pending
 * request, found still running: its instance lives (it missed its renewals in a pause), and a
 * request's lease owner is its request id, so it renews it again and gives it up when it commits.
 * Kept by the taker, the lease would refuse every request on the channel until it ran out.
 */
export async function handLeaseBack(db: Kysely<Database>, channelId: string, owner: string, requestId: string, now: number, leaseMs: number): Promise<void> {
  await db
    .updateTable('channels')
    .set({ lease_owner: requestId, lease_until: now + leaseMs, updated_at: now })
    .where('channel_id', '=', channelId.toLowerCase())
    .where('lease_owner', '=', owner)
    .where('pending_request', '=', requestId)
    .execute();
}

/** Gives up `owner`'s lease when no request of it is pending (a refused or failed request). */
export async function dropLease(db: Kysely<Database>, channelId: string, owner: string, now: number): Promise<void> {
  await db
    .updateTable('channels')
    .set({ lease_owner: null, lease_until: null, updated_at: now })
    .where('channel_id', '=', channelId.toLowerCase())
    .where('lease_owner', '=', owner)
    .where('pending_request', 'is', null)
    .execute();
}

/**
 * Marks `signature` as the channel's last refund voucher; false when it already is (a replay). A
 * refund voucher signs exactly what the channel has been charged and carries no nonce or amount the
 * contract checks, and its ECDSA signature is deterministic: the same signature is the same refund
 * asked again.
 */
export async function markRefundVoucher(db: Kysely<Database>, channelId: string, signature: string, now: number): Promise<boolean> {
  const sig = signature.toLowerCase();
  const marked = await db
    .updateTable('channels')
    .set({ last_refund_signature: sig, updated_at: now })
    .where('channel_id', '=', channelId.toLowerCase())
    .where((eb) => eb.or([eb('last_refund_signature', 'is', null), eb('last_refund_signature', '<>', sig)]))
    .executeTakeFirst();
  return Number(marked.numUpdatedRows) === 1;
}

/** Un-marks `signature` after a refund that did not happen (the facilitator refused it), so the payer may ask again. */
export async function unmarkRefundVoucher(db: Kysely<Database>, channelId: string, signature: string, now: number): Promise<void> {
  await db
    .updateTable('channels')
    .set({ last_refund_signature: null, updated_at: now })
    .where('channel_id', '=', channelId.toLowerCase())
    .where('last_refund_signature', '=', signature.toLowerCase())
    .execute();
}

/** The on-chain fields as the facilitator (or the chain) last reported them, with when. Only under the caller's lease. */
export async function mirrorChain(db: Kysely<Database>, channelId: string, s: ChannelSnapshot, now: number): Promise<void> {
  await db
    .updateTable('channels')
    .set({
      balance_usdc: s.balance,
      total_claimed_usdc: s.totalClaimed,
      withdraw_requested_at: s.withdrawRequestedAt,
      refund_nonce: s.refundNonce,
      synced_at: now,
      updated_at: now,
    })
    .where('channel_id', '=', channelId.toLowerCase())
    .execute();
}

/**
 * A deposit or refund made through this gateway, once per transaction: its amount added to the
 * channel's `deposited_usdc` or `refunded_usdc` in the transaction that records it. False when this
 * transaction was recorded already.
 */
export async function recordTransfer(
  db: Kysely<Database>,
  t: { channelId: string; kind: ChannelTransferTable['kind']; amountUsdc: number; txHash: string },
  now: number,
): Promise<boolean> {
  return db.transaction().execute((trx) => insertTransfer(trx, t, now));
}

async function insertTransfer(
  trx: Kysely<Database>,
  t: { channelId: string; kind: ChannelTransferTable['kind']; amountUsdc: number; txHash: string },
  now: number,
): Promise<boolean> {
  const inserted = await trx
    .insertInto('channel_transfers')
    .values({ channel_id: t.channelId.toLowerCase(), kind: t.kind, amount_usdc: t.amountUsdc, tx_hash: t.txHash.toLowerCase(), created_at: now })
    .onConflict((oc) => oc.columns(['kind', 'tx_hash', 'channel_id']).doNothing())
    .executeTakeFirst();
  if (Number(inserted.numInsertedOrUpdatedRows ?? 0n) !== 1) return false;
  const column = t.kind === 'deposit' ? 'deposited_usdc' : t.kind === 'refund' ? 'refunded_usdc' : null;
  if (column) {
    await trx
      .updateTable('channels')
      .set((eb) => ({ [column]: eb(column, '+', t.amountUsdc), updated_at: now }))
      .where('channel_id', '=', t.channelId.toLowerCase())
      .execute();
  }
  return true;
}

/**
 * A held refund found landed: `owner`'s hold dropped, the mirror set to the chain's state after it and
 * the refund recorded, in one transaction. Only the resolver that still finds the hold records it: two
 * that read the row held (the payer's retry, a claim pass) may both find it. False when the hold was
 * gone (resolved already).
 */
export async function resolveRefundHold(
  db: Kysely<Database>,
  channelId: string,
  owner: string,
  snapshot: ChannelSnapshot,
  refund: { amountUsdc: number; txHash: string },
  now: number,
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const freed = await trx
      .updateTable('channels')
      .set({ lease_owner: null, lease_until: null, updated_at: now })
      .where('channel_id', '=', channelId.toLowerCase())
      .where('lease_owner', '=', owner)
      .where('pending_request', 'is', null)
      .executeTakeFirst();
    if (Number(freed.numUpdatedRows) !== 1) return false;
    await mirrorChain(trx, channelId, snapshot, now);
    if (refund.amountUsdc > 0) await insertTransfer(trx, { channelId, kind: 'refund', ...refund }, now);
    return true;
  });
}

/** Channels whose charges are not all claimed on chain yet, the most owed first: the background claimer's work list. */
export async function listUnclaimed(db: Kysely<Database>, limit = 100): Promise<ChannelRow[]> {
  const rows = await db
    .selectFrom('channels')
    .selectAll()
    .where((eb) => eb('charged_usdc', '>', eb.ref('total_claimed_usdc')))
    .where('signature', 'is not', null)
    .orderBy((eb) => eb('charged_usdc', '-', eb.ref('total_claimed_usdc')), 'desc')
    .limit(limit)
    .execute();
  return rows.map(toNumbers);
}

/**
 * A claim of `claimedUsdc` (the voucher's claimed total) landed for the channel: its mirrored
 * totalClaimed moves up to it. Never down, and never above what the gateway charged (a claim
 * beyond the charges would take the payer's escrow): false when refused.
 */
export async function markClaimed(db: Kysely<Database>, channelId: string, claimedUsdc: number, txHash: string, now: number): Promise<boolean> {
  const moved = await db
    .updateTable('channels')
    .set({ total_claimed_usdc: claimedUsdc, updated_at: now })
    .where('channel_id', '=', channelId.toLowerCase())
    .where('total_claimed_usdc', '<=', claimedUsdc)
    .where('charged_usdc', '>=', claimedUsdc)
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) !== 1) return false;
  await recordTransfer(db, { channelId, kind: 'claim', amountUsdc: claimedUsdc, txHash }, now);
  return true;
}

/** Channels with a timed withdrawal under way (mirrored): their charges must be claimed before it completes. */
export async function listWithdrawing(db: Kysely<Database>, limit = 100): Promise<ChannelRow[]> {
  const rows = await db.selectFrom('channels').selectAll().where('withdraw_requested_at', '>', 0).orderBy('withdraw_requested_at').limit(limit).execute();
  return rows.map(toNumbers);
}
