import type { Kysely } from 'kysely';
import { hexToBigInt, keccak256, sliceHex, toHex, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import type { Database } from '../../storage/schema.ts';
import { REFUND_LEASE_PREFIX, dropLease, mirrorChain, recordTransfer, unmarkRefundVoucher, type ChannelRow } from './channel-store.ts';
import { batchSettlementAddress, readOnchainChannel, snapshotFromChain } from './onchain-channel.ts';

/**
 * A cooperative refund whose transaction was sent but whose receipt the facilitator stopped
 * waiting for (`settlement_pending`): it may still be mined, or never be. Until its fate is known
 * the channel takes nothing else: a request served meanwhile would be charged against escrow the
 * refund is about to pay back (the refund pays out balance − totalClaimed, so such a charge could
 * never be claimed), and a second refund is pointless (the contract's refund nonce lets one of the
 * two land). The refund keeps the channel's lease under the owner `refund-tx:<hash>:<nonce>`, which
 * is also where its hash is kept: the payer's retry, and every claim pass, read that transaction's receipt
 * and bring the row up to it (the refund's transfer, the mirror), then give the channel back.
 * No request takes that lease over however old it is (channel-store.ts takeLease): only the
 * refund's fate frees it (mined, reverted, or dropped by the node).
 */
const OWNER_PREFIX = REFUND_LEASE_PREFIX;

/**
 * How long a refund's transaction may stay unmined before the gateway asks whether the node lost
 * it (the hold's `lease_until`): far above any receipt wait (a relayer transaction is re-priced
 * within minutes, fee-bump.ts). Past it, a transaction the node no longer knows (or whose nonce
 * another transaction used), with no refund landed on the channel since, is dropped: the voucher
 * is released and the channel given back. Until then, and while the transaction still waits in the
 * mempool, the channel stays held: it could still be mined, however late.
 */
export const REFUND_IN_FLIGHT_MS = 15 * 60_000;

// The owner is `refund-tx:<hash>:<refund nonce the transaction spends>`: the nonce tells a dropped refund from one that
// landed (refundDropped). The mirror's refund nonce cannot: a claim pass refreshes it meanwhile.
const HASH_CHARS = 66;

/** Whether the channel is held for a refund whose fate is not read yet. */
export const heldForRefund = (row: Pick<ChannelRow, 'lease_owner'>): boolean => row.lease_owner?.startsWith(OWNER_PREFIX) ?? false;

/** The hash of the refund the channel is held for, if any. */
export function refundInFlight(row: Pick<ChannelRow, 'lease_owner'>): Hex | null {
  return row.lease_owner?.startsWith(OWNER_PREFIX) ? (row.lease_owner.slice(OWNER_PREFIX.length, OWNER_PREFIX.length + HASH_CHARS) as Hex) : null;
}

/** The refund nonce the held refund's transaction spends; null for a hold written without it. */
const nonceSpent = (owner: string): string | null => owner.slice(OWNER_PREFIX.length + HASH_CHARS + 1) || null;

/**
 * The refund's lease (`owner`) becomes the unconfirmed transaction's (`tx`, spending the channel's
 * `refundNonce`); after REFUND_IN_FLIGHT_MS it is looked at as maybe dropped. False if the lease was lost.
 */
export async function holdForRefund(db: Kysely<Database>, channelId: string, owner: string, tx: string, refundNonce: string, now: number): Promise<boolean> {
  const held = await db
    .updateTable('channels')
    .set({ lease_owner: `${OWNER_PREFIX}${tx.toLowerCase()}:${refundNonce}`, lease_until: now + REFUND_IN_FLIGHT_MS, updated_at: now })
    .where('channel_id', '=', channelId.toLowerCase())
    .where('lease_owner', '=', owner)
    .where('pending_request', 'is', null)
    .executeTakeFirst();
  return Number(held.numUpdatedRows) === 1;
}

// The refund event: the reference contract's, and the stand-in's (which adds the nonce). Either way
// the channel is the first topic and the amount paid back the first word of the data.
const REFUNDED_TOPICS = new Set(
  ['Refunded(bytes32,address,uint128)', 'Refunded(bytes32,address,uint128,uint256)'].map((s) => keccak256(toHex(s)).toLowerCase()),
);

function refundedIn(receipt: TransactionReceipt, channelId: string): number | null {
  for (const log of receipt.logs) {
    if (log.address.toLowerCase() !== batchSettlementAddress.toLowerCase() || !REFUNDED_TOPICS.has((log.topics[0] ?? '').toLowerCase())) continue;
    if ((log.topics[1] ?? '').toLowerCase() !== channelId.toLowerCase()) continue;
    return Number(hexToBigInt(sliceHex(log.data, 0, 32)));
  }
  return null;
}

/**
 * What became of the held refund. `pending`: not mined yet, the channel stays held; `unresolved`
 * names why an operator should look (its transaction is gone, yet a refund may have landed on the
 * channel: the refund nonce moved, as under a replacement whose hash the gateway does not know, or is not known). `dropped`: the node lost it, nothing landed.
 */
export type RefundFate = { kind: 'pending'; unresolved?: string } | { kind: 'landed'; refundedUsdc: number } | { kind: 'failed' } | { kind: 'dropped' };

/**
 * Reads the held refund's receipt and acts on it: mined, the mirror is refreshed from the chain's
 * latest block (which includes the refund: the read refuses a node behind the receipt's block) and
 * the refund recorded once (its amount from its Refunded event; nothing when the refund paid 0);
 * reverted, or dropped (refundDropped), the refund voucher is released so the payer may ask again.
 * In those three cases the channel is given back. Not mined and not dropped: nothing changes.
 */
export async function settleRefundInFlight(db: Kysely<Database>, client: PublicClient, row: ChannelRow, tx: Hex, now: number): Promise<RefundFate> {
  const receipt = await client.getTransactionReceipt({ hash: tx }).catch((err: Error) => {
    if (err.name === 'TransactionReceiptNotFoundError') return null;
    throw err;
  });
  const owner = row.lease_owner ?? `${OWNER_PREFIX}${tx.toLowerCase()}`;
  if (!receipt) {
    if (row.lease_until !== null && row.lease_until >= now) return { kind: 'pending' };
    const dropped = await refundDropped(client, row, tx, nonceSpent(owner));
    if (dropped !== true) return { kind: 'pending', unresolved: dropped || undefined };
    await releaseRefund(db, row, owner, now);
    return { kind: 'dropped' };
  }
  if (receipt.status !== 'success') {
    await releaseRefund(db, row, owner, now);
    return { kind: 'failed' };
  }
  const chain = await readOnchainChannel(client, row.channel_id as Hex, undefined, receipt.blockNumber);
  await mirrorChain(db, row.channel_id, snapshotFromChain(row.channel_id, chain), now);
  const refundedUsdc = refundedIn(receipt, row.channel_id) ?? 0;
  if (refundedUsdc > 0) await recordTransfer(db, { channelId: row.channel_id, kind: 'refund', amountUsdc: refundedUsdc, txHash: tx }, now);
  await dropLease(db, row.channel_id, owner, now);
  return { kind: 'landed', refundedUsdc };
}

/** A refund that did not land: its voucher may be asked again, and the channel is given back. */
async function releaseRefund(db: Kysely<Database>, row: ChannelRow, owner: string, now: number): Promise<void> {
  if (row.last_refund_signature) await unmarkRefundVoucher(db, row.channel_id, row.last_refund_signature, now);
  await dropLease(db, row.channel_id, owner, now);
}

/**
 * True when the unmined refund `tx` can no longer land: the node does not know it, or its sender's
 * confirmed nonce is past it (another transaction took its nonce), and the channel's refund nonce
 * on chain is still the one it spends (no refund landed since it was sent). Re-sending it is then safe: the contract's
 * refund nonce lets only one refund land. False while it waits in the mempool; a reason (string)
 * when it is gone yet a refund landed on the channel (a replacement under another hash): the
 * channel stays held for an operator rather than be charged against escrow paid back.
 */
async function refundDropped(client: PublicClient, row: ChannelRow, tx: Hex, spends: string | null): Promise<boolean | string> {
  const sent = await client.getTransaction({ hash: tx }).catch((err: Error) => {
    if (err.name === 'TransactionNotFoundError') return null;
    throw err;
  });
  if (sent) {
    if (sent.blockNumber !== null) return false;
    const confirmed = await client.getTransactionCount({ address: sent.from, blockTag: 'latest' });
    if (confirmed <= sent.nonce) return false;
  }
  const chain = await readOnchainChannel(client, row.channel_id as Hex);
  if (spends !== null && String(chain.refundNonce) === spends) return true;
  const why = spends === null ? 'the refund nonce it spends is not known' : `the channel's refund nonce on chain is ${chain.refundNonce}, not ${spends}`;
  return `its refund ${tx} is gone from the node, yet ${why}: a refund may have landed under another transaction`;
}
