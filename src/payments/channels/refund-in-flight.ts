import type { Kysely } from 'kysely';
import { hexToBigInt, keccak256, sliceHex, toHex, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import type { Database } from '../../storage/schema.ts';
import { REFUND_LEASE_PREFIX, dropLease, resolveRefundHold, unmarkRefundVoucher, type ChannelRow } from './channel-store.ts';
import { batchSettlementAddress, readOnchainChannel, snapshotFromChain } from './onchain-channel.ts';
import { recordRefundLanded } from './refund-landed-elsewhere.ts';

/**
 * A cooperative refund whose transaction was sent but whose receipt the facilitator stopped
 * waiting for (`settlement_pending`), or that a facilitator threw while sending (its hash then
 * unknown): it may still be mined, or never be. Until its fate is known
 * the channel takes nothing else: a request served meanwhile would be charged against escrow the
 * refund is about to pay back (the refund pays out balance − totalClaimed, so such a charge could
 * never be claimed), and a second refund is pointless (the contract's refund nonce lets one of the
 * two land). The refund keeps the channel's lease under the owner `refund-tx:<hash>:<nonce>`, which
 * is also where its hash is kept: the payer's retry, and every claim pass, read that transaction's receipt
 * and bring the row up to it (the refund's transfer, the mirror), then give the channel back.
 * No request takes that lease over however old it is (channel-store.ts takeLease): only the
 * refund's fate frees it (mined, reverted, dropped by the node, or found on chain under another
 * transaction by the refund nonce it spends).
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
// landed. The mirror's refund nonce cannot: a claim pass refreshes it meanwhile. The hash is `unknown` when the
// facilitator threw while sending the refund: it may have been broadcast or not, and only the chain can say which.
const UNKNOWN_HASH = 'unknown';

/** Whether the channel is held for a refund whose fate is not read yet. */
export const heldForRefund = (row: Pick<ChannelRow, 'lease_owner'>): boolean => row.lease_owner?.startsWith(OWNER_PREFIX) ?? false;

/** The refund the channel is held for, if any: its hash (null when not known) and the refund nonce it spends (null for a hold written without it). */
export function refundInFlight(row: Pick<ChannelRow, 'lease_owner'>): { tx: Hex | null; spends: string | null } | null {
  if (!row.lease_owner || !heldForRefund(row)) return null;
  const [tx = '', spends = ''] = row.lease_owner.slice(OWNER_PREFIX.length).split(':');
  return { tx: tx === UNKNOWN_HASH ? null : (tx as Hex), spends: spends || null };
}

/**
 * The refund's lease (`owner`) becomes the unconfirmed transaction's (`tx`, spending the channel's
 * `refundNonce`; null when the facilitator threw while sending it); after REFUND_IN_FLIGHT_MS it is looked at as maybe dropped.
 * False if the lease was lost.
 */
export async function holdForRefund(
  db: Kysely<Database>,
  channelId: string,
  owner: string,
  tx: string | null,
  refundNonce: string,
  now: number,
): Promise<boolean> {
  const hash = tx?.toLowerCase() ?? UNKNOWN_HASH;
  const held = await db
    .updateTable('channels')
    .set({ lease_owner: `${OWNER_PREFIX}${hash}:${refundNonce}`, lease_until: now + REFUND_IN_FLIGHT_MS, updated_at: now })
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
 * What became of the held refund. `pending`: not booked, the channel stays held; `unresolved` names why an
 * operator should look (its transaction is gone, yet the gateway cannot tell whether a refund landed: the
 * nonce it spends, or its hash, is not known); `unbooked` when the chain shows it landed but its Refunded
 * event, the only source of its amount, was not found (the next search books it). `landed`: booked under
 * `transaction` (its own, or the one the chain names for its nonce). `dropped`: the node lost it, nothing landed.
 */
export type RefundFate =
  | { kind: 'pending'; unresolved?: string; unbooked?: { nonce: string; searchFailure: string } }
  | { kind: 'landed'; refundedUsdc: number; transaction: string }
  | { kind: 'failed' }
  | { kind: 'dropped' };

/**
 * Reads the held refund's fate and acts on it. Mined: the mirror is refreshed from the chain's latest
 * block (which includes it: the read refuses a node behind the receipt's block) and the refund recorded
 * once (its amount from its Refunded event; nothing when it paid 0). Not mined, or reverted, or its hash
 * not known, while the contract's refund nonce is past the one it spends: a refund spending that nonce
 * landed under another transaction, recorded from its Refunded event (refund-landed-elsewhere.ts; held
 * while that event is not found). Reverted with
 * the nonce unmoved, or dropped (refundGone): the refund voucher is released so the payer may ask again.
 * In those cases the channel is given back; otherwise nothing changes.
 */
export async function settleRefundInFlight(db: Kysely<Database>, client: PublicClient, row: ChannelRow, tx: Hex | null, now: number): Promise<RefundFate> {
  const owner = row.lease_owner ?? `${OWNER_PREFIX}${tx?.toLowerCase() ?? UNKNOWN_HASH}`;
  const spends = refundInFlight({ lease_owner: owner })?.spends ?? null;
  const receipt = tx ? await receiptOf(client, tx) : null;
  if (receipt?.status === 'success' && tx) return landedWithReceipt(db, client, row, owner, tx, receipt, now);
  if (spends !== null) {
    const chain = await readOnchainChannel(client, row.channel_id as Hex, undefined, receipt?.blockNumber);
    if (chain.refundNonce > BigInt(spends)) {
      const landed = await recordRefundLanded(db, client, row, owner, BigInt(spends), chain, now);
      if (!landed.booked) return { kind: 'pending', unbooked: { nonce: String(spends), searchFailure: landed.searchFailure } };
      return { kind: 'landed', refundedUsdc: landed.refundedUsdc, transaction: landed.transaction };
    }
  }
  if (receipt) {
    await releaseRefund(db, row, owner, now);
    return { kind: 'failed' };
  }
  if (row.lease_until !== null && row.lease_until >= now) return { kind: 'pending' };
  if (!tx) {
    const unresolved =
      `its refund's transaction is not known (the facilitator failed while sending it) ` + `and no refund spending nonce ${spends} landed: it may still`;
    return { kind: 'pending', unresolved };
  }
  if (!(await refundGone(client, tx))) return { kind: 'pending' };
  if (spends === null) {
    const unresolved =
      `its refund ${tx} is gone from the node, yet the refund nonce it spends is not known: ` + 'a refund may have landed under another transaction';
    return { kind: 'pending', unresolved };
  }
  await releaseRefund(db, row, owner, now);
  return { kind: 'dropped' };
}

async function receiptOf(client: PublicClient, tx: Hex): Promise<TransactionReceipt | null> {
  return client.getTransactionReceipt({ hash: tx }).catch((err: Error) => {
    if (err.name === 'TransactionReceiptNotFoundError') return null;
    throw err;
  });
}

async function landedWithReceipt(
  db: Kysely<Database>,
  client: PublicClient,
  row: ChannelRow,
  owner: string,
  tx: Hex,
  receipt: TransactionReceipt,
  now: number,
): Promise<RefundFate> {
  const chain = await readOnchainChannel(client, row.channel_id as Hex, undefined, receipt.blockNumber);
  const refundedUsdc = refundedIn(receipt, row.channel_id) ?? 0;
  await resolveRefundHold(db, row.channel_id, owner, snapshotFromChain(row.channel_id, chain), { amountUsdc: refundedUsdc, txHash: tx }, now);
  return { kind: 'landed', refundedUsdc, transaction: tx };
}

/** A refund that did not land: its voucher may be asked again, and the channel is given back. */
async function releaseRefund(db: Kysely<Database>, row: ChannelRow, owner: string, now: number): Promise<void> {
  if (row.last_refund_signature) await unmarkRefundVoucher(db, row.channel_id, row.last_refund_signature, now);
  await dropLease(db, row.channel_id, owner, now);
}

/**
 * True when the unmined refund `tx` can no longer be mined: the node does not know it, or its sender's
 * confirmed nonce is past it (another transaction took its nonce). With the channel's refund nonce
 * unmoved (the caller's check), re-sending it is then safe: the contract's refund nonce lets only one
 * refund land. False while it waits in the mempool.
 */
async function refundGone(client: PublicClient, tx: Hex): Promise<boolean> {
  const sent = await client.getTransaction({ hash: tx }).catch((err: Error) => {
    if (err.name === 'TransactionNotFoundError') return null;
    throw err;
  });
  if (!sent) return true;
  if (sent.blockNumber !== null) return false;
  const confirmed = await client.getTransactionCount({ address: sent.from, blockTag: 'latest' });
  return confirmed > sent.nonce;
}
