import type { Kysely } from 'kysely';
import { parseAbiItem, type Hex } from 'viem';
import type { Database } from '../../../storage/schema.ts';
import { findChannel, markClaimed, type ChannelRow } from '../channel-store.ts';
import { batchSettlementAddress } from '../onchain-channel.ts';
import { searchBackwards, type LogReader } from '../channel-logs.ts';

/**
 * A claim that landed on chain while its row was not updated (a crash between the two, or a
 * cooperative refund whose claim landed after the gateway stopped waiting for it): found by the
 * next claim pass as an on-chain totalClaimed above the mirrored one. It is recorded as the claim
 * it was, in the channel's row and its transfer history, with the transaction the contract's
 * Claimed event names if one is found; otherwise under a marker that says it was recovered.
 */

// x402BatchSettlement's event (the reference contract's signature; the stand-in emits the same).
const claimedEvent = parseAbiItem('event Claimed(bytes32 indexed channelId, address indexed sender, uint128 claimAmount, uint128 newTotalClaimed)');

/** The transaction hash recorded for a recovered claim whose transaction was not found. */
export const recoveredClaimMarker = (totalClaimed: bigint) => `recovered:${totalClaimed}`;

/** The transaction whose Claimed event brought `channelId`'s totalClaimed to `totalClaimed`, searched back from the newest block; null if none. */
export function findClaimTransaction(client: LogReader, channelId: Hex, totalClaimed: bigint): Promise<Hex | null> {
  return searchBackwards(client, async (fromBlock, toBlock) => {
    const logs = await client.getLogs({ address: batchSettlementAddress, event: claimedEvent, args: { channelId }, fromBlock, toBlock });
    return [...logs].reverse().find((l) => l.args.newTotalClaimed === totalClaimed && l.transactionHash)?.transactionHash ?? null;
  });
}

export interface RecoveredClaim {
  /** What the recovered claim added to what the row recorded as claimed. */
  claimedUsdc: number;
  /** Its transaction, or recoveredClaimMarker when it was not found. */
  txHash: string;
  /** Why the transaction is not named, when it is not. */
  searchFailure?: string;
}

/**
 * Records the claim that brought `row`'s channel to `totalClaimed` on chain: the row's
 * total_claimed_usdc and one `claim` transfer (its amount the cumulative total, as every claim's).
 * Null when the row caught up meanwhile (another writer recorded it): nothing is written twice.
 */
export async function recordRecoveredClaim(
  db: Kysely<Database>,
  client: LogReader,
  row: ChannelRow,
  totalClaimed: bigint,
  now: number,
): Promise<RecoveredClaim | null> {
  let txHash: string | null = null;
  let searchFailure: string | undefined;
  try {
    txHash = await findClaimTransaction(client, row.channel_id as Hex, totalClaimed);
  } catch (err) {
    // An RPC that refuses the log search must not keep the claim out of the history for good.
    searchFailure = (err as Error).message.split('\n')[0];
  }
  const current = await findChannel(db, row.channel_id);
  if (!current || BigInt(current.total_claimed_usdc) >= totalClaimed) return null;
  const recorded = txHash ?? recoveredClaimMarker(totalClaimed);
  if (!(await markClaimed(db, row.channel_id, Number(totalClaimed), recorded, now))) return null;
  return { claimedUsdc: Number(totalClaimed) - current.total_claimed_usdc, txHash: recorded, ...(searchFailure ? { searchFailure } : {}) };
}
