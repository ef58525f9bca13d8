import { PERMIT2_ADDRESS } from '@x402/evm';
import { encodeAbiParameters, keccak256, parseAbi, type Address, type Hex, type PublicClient } from 'viem';
import { isTransportError } from '../../chain/rpc-errors.ts';
import type { BoundChannelPayment } from './channel-binding.ts';
import type { ChannelPayload } from './channel-payload.ts';
import type { ChannelSnapshot } from './channel-types.ts';
import { readOnchainChannel, snapshotFromChain } from './onchain-channel.ts';

type Deposit = Extract<ChannelPayload, { type: 'deposit' }>;

const abi = parseAbi([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function nonceBitmap(address owner, uint256 wordPos) view returns (uint256)',
]);

/**
 * The channel as the chain holds it when this deposit is in it already, else null: read from the
 * chain, never from a verify answer, which may count the deposit as about to be made.
 */
export async function landedDeposit(
  client: Pick<PublicClient, 'readContract' | 'getBlockNumber'>,
  channelId: Hex,
  deposit: Deposit,
): Promise<ChannelSnapshot | null> {
  if (!(await authorizationUsed(client, channelId, deposit).catch(notLandedUnlessOutage))) return null;
  return snapshotFromChain(channelId, await readOnchainChannel(client, channelId));
}

/**
 * A read the chain refused (a token without the function, a revert) says nothing landed: the
 * facilitator then judges the payload and answers why. An RPC that is not answering stays an outage.
 */
function notLandedUnlessOutage(err: unknown): false {
  if (isTransportError(err)) throw err;
  return false;
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * Whether this deposit's token authorization has already been used on chain. Both collectors bind
 * the authorization to its channel (the EIP-3009 nonce is keccak256(channelId, salt), the Permit2
 * witness names the channel id) and the token or Permit2 takes each nonce once, so a used one means
 * this very deposit is in this channel already: the payload sent again after its request failed,
 * or by anyone who relayed it to the contract. Its voucher still pays for a request; its deposit
 * cannot be made twice, and the facilitator would only refuse it as a failed simulation.
 */
async function authorizationUsed(client: Pick<PublicClient, 'readContract'>, channelId: Hex, deposit: Deposit): Promise<boolean> {
  const { authorization } = deposit.deposit;
  if (authorization.erc3009Authorization) {
    const { salt } = authorization.erc3009Authorization;
    const nonce = keccak256(encodeAbiParameters([{ type: 'bytes32' }, { type: 'uint256' }], [channelId, BigInt(salt)]));
    const token = deposit.channelConfig.token as Address;
    return client.readContract({ address: token, abi, functionName: 'authorizationState', args: [deposit.channelConfig.payer as Address, nonce] });
  }
  const { from, nonce, witness, permitted } = authorization.permit2Authorization;
  // Permit2 nonces are the owner's, not the channel's: only an authorization naming this channel,
  // its payer and its token can be this channel's deposit. Another one, used, is someone else's.
  const { payer, token } = deposit.channelConfig;
  if (!same(witness.channelId, channelId) || !same(from, payer) || !same(permitted.token, token)) return false;
  const n = BigInt(nonce);
  const word = await client.readContract({ address: PERMIT2_ADDRESS, abi, functionName: 'nonceBitmap', args: [from as Address, n >> 8n] });
  return ((word >> (n & 0xffn)) & 1n) === 1n;
}

/** The payment's voucher alone, as the spec's voucher payload (what the facilitator then verifies). */
export function asVoucher(bound: BoundChannelPayment): BoundChannelPayment {
  const { channelConfig, voucher } = bound.inner;
  const inner = { type: 'voucher' as const, channelConfig, voucher };
  return { ...bound, inner, payload: { ...bound.payload, payload: inner as unknown as Record<string, unknown> } };
}
