import { BATCH_SETTLEMENT_ADDRESS, BATCH_SETTLEMENT_DOMAIN, voucherTypes } from '@x402/evm';
import { recoverTypedDataAddress, zeroAddress } from 'viem';
import { chainIdOf } from '../match.ts';
import type { ChannelConfig } from './channel-types.ts';

/** Who signed a voucher for `maxClaimable` on `channelId` (EIP-712 recovery), or null for a signature that recovers to nobody. */
export async function voucherSigner(channelId: `0x${string}`, maxClaimable: bigint, signature: `0x${string}`, network: string): Promise<string | null> {
  try {
    const signer = await recoverTypedDataAddress({
      domain: { ...BATCH_SETTLEMENT_DOMAIN, chainId: chainIdOf(network), verifyingContract: BATCH_SETTLEMENT_ADDRESS },
      types: voucherTypes,
      primaryType: 'Voucher',
      message: { channelId, maxClaimableAmount: maxClaimable },
      signature,
    });
    return signer.toLowerCase();
  } catch {
    return null;
  }
}

/**
 * Whether the gateway may check this channel's vouchers itself: only when the config commits to an
 * EOA payer authorizer (plain ECDSA). A zero authorizer means the payer is a contract wallet whose
 * EIP-1271 answer only the chain gives: those go to the facilitator every time.
 */
export const verifiesLocally = (config: Pick<ChannelConfig, 'payerAuthorizer'>) => config.payerAuthorizer.toLowerCase() !== zeroAddress;
