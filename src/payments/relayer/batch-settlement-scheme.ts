import type { x402Facilitator } from '@x402/core/facilitator';
import type { FacilitatorContext, Network, PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types';
import {
  isBatchSettlementClaimPayload,
  isBatchSettlementEnrichedRefundPayload,
  isBatchSettlementSettlePayload,
  type ChannelConfig,
  type FacilitatorEvmSigner,
} from '@x402/evm';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/facilitator';
import type { LocalAccount } from 'viem';

const RECEIVER_MISMATCH = 'invalid_batch_settlement_evm_receiver_mismatch';
const TOKEN_MISMATCH = 'invalid_batch_settlement_evm_token_mismatch';

/**
 * @x402/evm's batch-settlement facilitator on `network`: deposits (EIP-3009 and Permit2 through the
 * canonical collectors), claims of many channels in one `claimWithSignature`, `settle`, and the
 * cooperative refund, all sent by the relayer (its send lock, its receipt waits).
 *
 * `receiverAuthorizer`, when given, is the key that signs ClaimBatch and Refund authorizations the
 * resource server leaves out; the facilitator advertises its address in /supported
 * (`extra.receiverAuthorizer`) and the gateway puts it in its 402. Without it the scheme signs nothing
 * and a claim or refund must carry the server's own signatures. Because that key signs for whoever asks, claims, settles and
 * refunds are accepted here only for channels paying `requirements.payTo` in `requirements.asset`:
 * the package checks the channel against the requirements at deposit and voucher verify only, and
 * `tollgate facilitator` admits only its own payTo (src/http/facilitator-server.ts), so a caller
 * cannot have the key sign claims or refunds on other receivers' channels. Within the payTo's own
 * channels the key signs any total up to the payer's signed ceiling: the caller is the gateway
 * itself (in-process) or, through `tollgate facilitator`, an instance holding its bearer token.
 */
class BatchSettlementForPayTo extends BatchSettlementEvmScheme {
  override async settle(payload: PaymentPayload, requirements: PaymentRequirements, context?: FacilitatorContext): Promise<SettleResponse> {
    const refusal = outsidePayTo(payload.payload, requirements);
    if (refusal) return { success: false, errorReason: refusal, transaction: '', network: requirements.network };
    return super.settle(payload, requirements, context);
  }
}

/** The spec's error code when a claim, settle or refund names another receiver or token than the requirements; undefined when it is the payTo's own. */
export function outsidePayTo(inner: Record<string, unknown>, requirements: PaymentRequirements): string | undefined {
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  const check = (receiver: string, token: string) => {
    if (!same(receiver, requirements.payTo)) return RECEIVER_MISMATCH;
    if (!same(token, requirements.asset)) return TOKEN_MISMATCH;
    return undefined;
  };
  const channels: ChannelConfig[] = [];
  if (isBatchSettlementClaimPayload(inner)) channels.push(...inner.claims.map((c) => c.voucher.channel));
  else if (isBatchSettlementEnrichedRefundPayload(inner)) channels.push(inner.channelConfig, ...inner.claims.map((c) => c.voucher.channel));
  else if (isBatchSettlementSettlePayload(inner)) return check(inner.receiver, inner.token);
  for (const channel of channels) {
    const refusal = check(channel.receiver, channel.token);
    if (refusal) return refusal;
  }
  return undefined;
}

export function registerBatchSettlementScheme(
  facilitator: x402Facilitator,
  signer: FacilitatorEvmSigner,
  network: string,
  receiverAuthorizer: LocalAccount | undefined,
  allowedFactories: string[],
): void {
  facilitator.register(network as Network, new BatchSettlementForPayTo(signer, receiverAuthorizer, { eip6492AllowedFactories: allowedFactories }));
}
