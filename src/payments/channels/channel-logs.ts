import type { PublicClient } from 'viem';

/**
 * The log search behind the recovery of a claim or refund the gateway did not record (a crash, a
 * transaction replaced on the node): the contract's events for one channel, newest first.
 */

// A lost transaction is found within a pass or two, or when the instance is back: about a day of
// Base's 2 s blocks is searched, newest first, in ranges most RPC providers serve in one eth_getLogs.
const LOOKBACK_BLOCKS = 50_000n;
const BLOCKS_PER_QUERY = 2_000n;

export type LogReader = Pick<PublicClient, 'getLogs' | 'getBlockNumber'>;

/** `inRange` over the lookback window from the newest block back, one block range at a time, until it finds something; null if it never does. */
export async function searchBackwards<T>(client: LogReader, inRange: (fromBlock: bigint, toBlock: bigint) => Promise<T | null>): Promise<T | null> {
  const latest = await client.getBlockNumber({ cacheTime: 0 });
  const oldest = latest > LOOKBACK_BLOCKS ? latest - LOOKBACK_BLOCKS : 0n;
  for (let toBlock = latest; toBlock >= oldest; toBlock -= BLOCKS_PER_QUERY) {
    const fromBlock = toBlock - BLOCKS_PER_QUERY + 1n > oldest ? toBlock - BLOCKS_PER_QUERY + 1n : oldest;
    const found = await inRange(fromBlock, toBlock);
    if (found !== null) return found;
    if (fromBlock === oldest) break;
  }
  return null;
}
