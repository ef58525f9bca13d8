import type { Facilitator } from '../facilitator/facilitator.ts';
import type { BoundChannelPayment } from './channel-binding.ts';
import { verifyWithFacilitator } from './channel-facilitator.ts';
import { verifiesLocally, voucherSigner } from './channel-voucher.ts';

/**
 * Whether the payload's voucher was signed by the channel's payer authorizer, whatever amount it
 * names. Anyone can name a channel (the payer's address and the stock client's zero salt are
 * public), so the channel's state and its last signed voucher go only to the payer: a stranger
 * holding them could replay the payer's last voucher on a request of its own. An EOA authorizer is
 * checked here (one EIP-712 recovery); a contract wallet's (EIP-1271) only the facilitator can
 * check, and a facilitator that refuses or does not answer proves nothing.
 */
export async function signedByPayer(facilitator: Facilitator, bound: BoundChannelPayment): Promise<boolean> {
  const local = signedLocallyByPayer(bound);
  if (local) return local;
  try {
    return (await verifyWithFacilitator(facilitator, bound.payload, bound.requirements, bound.channelId)).ok;
  } catch {
    return false;
  }
}

const localVerdicts = new WeakMap<BoundChannelPayment, Promise<boolean>>();

/**
 * Whether an EOA payer authorizer signed the payload's voucher (one EIP-712 recovery, made once per
 * payment however many checks ask); undefined for a contract wallet's, which only the facilitator can
 * check.
 */
export function signedLocallyByPayer(bound: BoundChannelPayment): Promise<boolean> | undefined {
  const { channelConfig, voucher } = bound.inner;
  if (!verifiesLocally(channelConfig)) return undefined;
  let verdict = localVerdicts.get(bound);
  if (!verdict) {
    verdict = voucherSigner(bound.channelId, BigInt(voucher.maxClaimableAmount), voucher.signature as `0x${string}`, bound.network).then(
      (signer) => signer === channelConfig.payerAuthorizer.toLowerCase(),
    );
    localVerdicts.set(bound, verdict);
  }
  return verdict;
}
