import type { Kysely } from 'kysely';
import { parseAbiItem, type Hex } from 'viem';
import type { Database } from '../../storage/schema.ts';
import { searchBackwards, type LogReader } from './channel-logs.ts';
import { resolveRefundHold, type ChannelRow } from './channel-store.ts';
import { batchSettlementAddress, snapshotFromChain, type OnchainChannel } from './onchain-channel.ts';

/**
 * A held refund (refund-in-flight.ts) that landed under a transaction the gateway does not hold:
 * its transaction was replaced on the node (re-broadcast at another fee), or the facilitator threw
 * after broadcasting it and never named it. The chain says it landed: the contract takes each
 * refund nonce once, in order, so a refund nonce past the one the hold spends means a refund
 * spending it is in. The chain also says which and how much: the contract's Refunded event for the
 * channel and that nonce. The refund is recorded from those figures alone, never from a
 * facilitator's or a payer's word nor from a balance difference, under the event's transaction (the
 * receipt path's key, so a refund found both ways is recorded once).
 */

// The stand-in's event names the nonce; the reference contract's does not, and is taken only when
// exactly one refund landed since the hold (its newest Refunded for the channel is then this one).
const refundedWithNonce = parseAbiItem('event Refunded(bytes32 indexed channelId, address indexed payer, uint128 amount, uint256 nonce)');
const refundedReference = parseAbiItem('event Refunded(bytes32 indexed channelId, address indexed payer, uint128 amount)');

interface RefundEvent {
  transaction: Hex;
  amount: bigint;
}

/** The Refunded event of `channelId` spending `nonce`; null if none is found in the lookback window. */
export function findRefundEvent(client: LogReader, channelId: Hex, nonce: bigint, nonceNow: bigint): Promise<RefundEvent | null> {
  const onlyOneSince = nonceNow === nonce + 1n;
  return searchBackwards(client, async (fromBlock, toBlock) => {
    const range = { address: batchSettlementAddress, args: { channelId }, fromBlock, toBlock } as const;
    const named = (await client.getLogs({ ...range, event: refundedWithNonce })).find((l) => l.args.nonce === nonce && l.transactionHash);
    if (named?.transactionHash) return { transaction: named.transactionHash, amount: named.args.amount ?? 0n };
    if (!onlyOneSince) return null;
    const newest = (await client.getLogs({ ...range, event: refundedReference })).filter((l) => l.transactionHash).at(-1);
    return newest?.transactionHash ? { transaction: newest.transactionHash, amount: newest.args.amount ?? 0n } : null;
  });
}

/**
 * Booked: the event's amount under its transaction. Not booked: why the event was not found. The
 * refund is in, but only its event says how much it paid (the chain's balance does not: a deposit
 * landing since moves it too), so the channel stays held and the next search books it.
 */
export type RefundLandedElsewhere = { booked: true; refundedUsdc: number; transaction: string } | { booked: false; searchFailure: string };

/**
 * Records the refund spending `nonce` that `chain` (the channel's state, its refund nonce past
 * `nonce`) shows landed, from its Refunded event: mirrors the chain and gives back `owner`'s hold
 * (once: resolveRefundHold). Without the event nothing is written and the hold stays.
 */
export async function recordRefundLanded(
  db: Kysely<Database>,
  client: LogReader,
  row: ChannelRow,
  owner: string,
  nonce: bigint,
  chain: OnchainChannel,
  now: number,
): Promise<RefundLandedElsewhere> {
  let found: RefundEvent | null;
  try {
    found = await findRefundEvent(client, row.channel_id as Hex, nonce, chain.refundNonce);
  } catch (err) {
    // An RPC that refuses the log search: the next search (a pass, the payer's retry) may be served.
    return { booked: false, searchFailure: (err as Error).message.split('\n')[0] ?? 'the log search failed' };
  }
  if (!found) return { booked: false, searchFailure: `no Refunded event for nonce ${nonce} in the blocks searched` };
  const refund = { amountUsdc: Number(found.amount), txHash: found.transaction.toLowerCase() };
  await resolveRefundHold(db, row.channel_id, owner, snapshotFromChain(row.channel_id, chain), refund, now);
  return { booked: true, refundedUsdc: refund.amountUsdc, transaction: refund.txHash };
}
