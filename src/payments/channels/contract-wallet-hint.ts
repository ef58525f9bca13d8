import type { Address, PublicClient } from 'viem';
import type { ChannelConfig } from './channel-types.ts';
import { CHANNEL_ERRORS } from './channel-types.ts';

/**
 * A voucher-signature refusal of a channel whose payer is a contract wallet named as its own
 * payerAuthorizer, with what to do: the contract checks a payerAuthorizer's vouchers by ECDSA only,
 * which a contract address never produces, so no voucher on that channel could ever be claimed.
 * The stock client builds exactly that config for a smart-wallet signer unless told otherwise.
 * Any other refusal (or a chain that does not answer the code read) is returned as it is.
 */
export async function withContractWalletHint(
  client: Pick<PublicClient, 'getCode'> | undefined,
  config: Pick<ChannelConfig, 'payer' | 'payerAuthorizer'>,
  reason: string,
): Promise<string> {
  if (reason !== CHANNEL_ERRORS.voucherSignature || !client) return reason;
  if (config.payer.toLowerCase() !== config.payerAuthorizer.toLowerCase()) return reason;
  const code = await client.getCode({ address: config.payer as Address }).catch(() => undefined);
  if (!code || code === '0x') return reason;
  return (
    `${reason}: the payer ${config.payer} is a contract wallet named as its own payerAuthorizer, whose vouchers the contract checks by ECDSA ` +
    "only; name its owner key as payerAuthorizer (the stock client's voucherSigner option), or the zero address to have each voucher checked by ERC-1271"
  );
}
