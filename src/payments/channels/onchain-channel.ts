import { BATCH_SETTLEMENT_ADDRESS, type ChannelConfig } from '@x402/evm';
import { computeChannelId } from '@x402/evm/batch-settlement/client';
import { getAddress, parseAbi, type Address, type Hex, type PublicClient } from 'viem';
import type { ChannelSnapshot } from './channel-types.ts';

/**
 * A batch-settlement channel as x402BatchSettlement holds it (contracts/StandInBatchSettlement.sol on
 * the dev chain): what the gateway mirrors, and what `ledger-check --chain` compares the mirror with.
 */
export interface OnchainChannel {
  /** Deposited minus refunded and withdrawn; claimed-but-unsettled funds still count here. */
  balance: bigint;
  totalClaimed: bigint;
  /** Unix seconds the payer's timed withdrawal started, 0 when none is pending. */
  withdrawRequestedAt: number;
  /** What that withdrawal asks for (capped at finalize by what is still unclaimed). */
  withdrawAmount: bigint;
  /** The nonce the next refundWithSignature must carry. */
  refundNonce: bigint;
}

export interface OnchainReceiver {
  totalClaimed: bigint;
  totalSettled: bigint;
}

/** The contract's getters, as @x402/evm's ABI names them (the package does not export the ABI). */
const batchSettlementReads = parseAbi([
  'function channels(bytes32 channelId) view returns (uint128 balance, uint128 totalClaimed)',
  'function pendingWithdrawals(bytes32 channelId) view returns (uint128 amount, uint40 initiatedAt)',
  'function refundNonce(bytes32 channelId) view returns (uint256)',
  'function receivers(address receiver, address token) view returns (uint128 totalClaimed, uint128 totalSettled)',
]);

type Reader = Pick<PublicClient, 'readContract' | 'getBlockNumber'>;

export const batchSettlementAddress: Address = getAddress(BATCH_SETTLEMENT_ADDRESS);

/** The channel id: the EIP-712 hash of the config under the contract's domain on `network`'s chain (the library's own function). */
export function channelIdOf(config: ChannelConfig, network: string): Hex {
  return computeChannelId(config, network);
}

/**
 * The channel's on-chain state, every field read at one block (a claim landing between the reads
 * would otherwise pair a new totalClaimed with an old balance). `blockNumber` pins it; default: the latest.
 * `notBefore`: the block of a transaction the caller just saw land (a deposit, claim or refund); a
 * node answering from before it (one behind a load balancer) would give the state without it, so
 * that read throws instead of mirroring the old state as fresh.
 */
export async function readOnchainChannel(client: Reader, channelId: Hex, blockNumber?: bigint, notBefore?: bigint): Promise<OnchainChannel> {
  // cacheTime 0: viem otherwise answers from a block number cached for its polling interval (4 s by
  // default), and the read would miss a claim or deposit that just landed.
  const at = blockNumber ?? (await client.getBlockNumber({ cacheTime: 0 }));
  if (notBefore !== undefined && at < notBefore) throw new Error(`the RPC answered from block ${at}, behind block ${notBefore} the caller saw land`);
  const read = { address: batchSettlementAddress, abi: batchSettlementReads, blockNumber: at } as const;
  const [[balance, totalClaimed], [withdrawAmount, initiatedAt], refundNonce] = await Promise.all([
    client.readContract({ ...read, functionName: 'channels', args: [channelId] }),
    client.readContract({ ...read, functionName: 'pendingWithdrawals', args: [channelId] }),
    client.readContract({ ...read, functionName: 'refundNonce', args: [channelId] }),
  ]);
  return { balance, totalClaimed, withdrawRequestedAt: initiatedAt, withdrawAmount, refundNonce };
}

/** The channel's state as the gateway's row mirrors it (and as the spec's `channelState` reports it). */
export const snapshotFromChain = (channelId: string, chain: OnchainChannel): ChannelSnapshot => ({
  channelId: channelId as Hex,
  balance: Number(chain.balance),
  totalClaimed: Number(chain.totalClaimed),
  withdrawRequestedAt: chain.withdrawRequestedAt,
  refundNonce: String(chain.refundNonce),
});

/** What `receiver` has claimed in `token` over all its channels, and how much of it `settle` has paid out. */
export async function readOnchainReceiver(client: Reader, receiver: Address, token: Address, blockNumber?: bigint): Promise<OnchainReceiver> {
  const [totalClaimed, totalSettled] = await client.readContract({
    address: batchSettlementAddress,
    abi: batchSettlementReads,
    functionName: 'receivers',
    args: [receiver, token],
    ...(blockNumber === undefined ? {} : { blockNumber }),
  });
  return { totalClaimed, totalSettled };
}
