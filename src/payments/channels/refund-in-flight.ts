import type { Kysely } from 'kysely';
import { hexToBigInt, keccak256, sliceHex, toHex, type Hex, type PublicClient, type TransactionReceipt } from 'viem';
import type { Database } from '../../storage/schema.ts';
import { dropLease, mirrorChain, recordTransfer, unmarkRefundVoucher, type ChannelRow } from './channel-store.ts';
import { batchSettlementAddress, readOnchainChannel, type OnchainChannel } from './onchain-channel.ts';
import type { ChannelSnapshot } from './channel-types.ts';

/**
 * A cooperative refund whose transaction was sent but whose receipt the facilitator stopped
 * waiting for (`settlement_pending`): it may still be mined, or never be. Until its fate is known
 * the channel takes nothing else: a request served meanwhile would be charged against escrow the
 * refund is about to pay back (the refund pays out balance − totalClaimed, so such a charge could
 * never be claimed), and a second refund is pointless (the contract's refund nonce lets one of the
 * two land). The refund keeps the channel's lease under the owner `refund-tx:<hash>`, which is also
 * where its hash is kept: the payer's retry, and every claim pass, read that transaction's receipt
 * and bring the row up to it (the refund's transfer, the mirror), then give the channel back.
 */
const OWNER_PREFIX = 'refund-tx:';

/**
 * How long the channel stays held for an unconfirmed refund: far above any receipt wait (a relayer
 * transaction is re-priced within minutes, fee-bump.ts), and bounded, so a refund whose transaction
 * the node lost for good does not close the channel for ever. A claim pass (at most every 300 s)
 * resolves a mined one well before then.
 */
export const REFUND_IN_FLIGHT_MS = 15 * 60_000;

/** The hash of the refund the channel is held for (or was, its hold run out with no request since), if any. */
export function refundInFlight(row: Pick<ChannelRow, 'lease_owner'>): Hex | null {
  return row.lease_owner?.startsWith(OWNER_PREFIX) ? (row.lease_owner.slice(OWNER_PREFIX.length) as Hex) : null;
}

/** The row's mirrored fields as the chain holds them. */
export const snapshotFromChain = (channelId: string, chain: OnchainChannel): ChannelSnapshot => ({
  channelId: channelId as Hex,
  balance: Number(chain.balance),
  totalClaimed: Number(chain.totalClaimed),
  withdrawRequestedAt: chain.withdrawRequestedAt,
  refundNonce: String(chain.refundNonce),
});

/** The refund's lease (`owner`) becomes the unconfirmed transaction's, for REFUND_IN_FLIGHT_MS. False if the lease was lost. */
export async function holdForRefund(db: Kysely<Database>, channelId: string, owner: string, tx: string, now: number): Promise<boolean> {
  const held = await db
    .updateTable('channels')
    .set({ lease_owner: `${OWNER_PREFIX}${tx.toLowerCase()}`, lease_until: now + REFUND_IN_FLIGHT_MS, updated_at: now })
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

export type RefundFate = { kind: 'pending' } | { kind: 'landed'; refundedUsdc: number } | { kind: 'failed' };

/**
 * Reads the held refund's receipt and acts on it: mined, the mirror is refreshed from the chain at
 * its block and the refund recorded once (its amount from its Refunded event; nothing when the
 * refund paid 0); reverted, the refund voucher is released so the payer may ask again. Either way
 * the channel is given back. No receipt yet: nothing changes.
 */
export async function settleRefundInFlight(db: Kysely<Database>, client: PublicClient, row: ChannelRow, tx: Hex, now: number): Promise<RefundFate> {
  const receipt = await client.getTransactionReceipt({ hash: tx }).catch((err: Error) => {
    if (err.name === 'TransactionReceiptNotFoundError') return null;
    throw err;
  });
  if (!receipt) return { kind: 'pending' };
  const owner = `${OWNER_PREFIX}${tx.toLowerCase()}`;
  if (receipt.status !== 'success') {
    if (row.last_refund_signature) await unmarkRefundVoucher(db, row.channel_id, row.last_refund_signature, now);
    await dropLease(db, row.channel_id, owner, now);
    return { kind: 'failed' };
  }
  const chain = await readOnchainChannel(client, row.channel_id as Hex, undefined, receipt.blockNumber);
  await mirrorChain(db, row.channel_id, snapshotFromChain(row.channel_id, chain), now);
  const refundedUsdc = refundedIn(receipt, row.channel_id) ?? 0;
  if (refundedUsdc > 0) await recordTransfer(db, { channelId: row.channel_id, kind: 'refund', amountUsdc: refundedUsdc, txHash: tx }, now);
  await dropLease(db, row.channel_id, owner, now);
  return { kind: 'landed', refundedUsdc };
}
