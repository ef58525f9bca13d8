import type { PaymentRequirements, SettleResponse } from '@x402/core/types';
import type { BatchSettlementVoucherClaim } from '@x402/evm';
import type { Facilitator } from '../../facilitator/facilitator.ts';
import { configOf, type ChannelRow } from '../channel-store.ts';

/**
 * The claim and settle payloads the spec's facilitator takes on /settle ("Claim & Settlement
 * Strategy"), without `claimAuthorizerSignature`: the facilitator holds the receiverAuthorizer key
 * (the local facilitator's, or the remote one this gateway delegates to) and signs the ClaimBatch.
 */

/** A channel to claim, up to `totalClaimed` (cumulative, so the same claim sent twice moves nothing the second time). */
export interface ClaimRow {
  row: ChannelRow;
  totalClaimed: number;
}

/**
 * The requirements a claim or settle is sent under: the channels' own receiver and token, so the
 * facilitator (which accepts claims only for its payTo's channels) checks them against it.
 */
function requirementsFor(network: string, receiver: string, token: string, extra: Record<string, unknown> = {}): PaymentRequirements {
  return {
    scheme: 'batch-settlement',
    network: network as PaymentRequirements['network'],
    asset: token,
    amount: '0',
    payTo: receiver,
    maxTimeoutSeconds: 300,
    extra,
  };
}

/** One claimWithSignature over `rows` (same network, receiver, token and receiverAuthorizer): each channel's latest signed voucher. */
export function sendClaim(facilitator: Facilitator, rows: ClaimRow[]): Promise<SettleResponse> {
  const first = rows[0]!.row;
  const claims: BatchSettlementVoucherClaim[] = rows.map(({ row, totalClaimed }) => ({
    voucher: { channel: configOf(row), maxClaimableAmount: String(row.signed_max_usdc) },
    signature: row.signature as `0x${string}`,
    totalClaimed: String(totalClaimed),
  }));
  const accepted = requirementsFor(first.network, first.receiver, first.token, {
    receiverAuthorizer: first.receiver_authorizer,
    withdrawDelay: first.withdraw_delay,
  });
  return facilitator.settle({ x402Version: 2, accepted, payload: { type: 'claim', claims } }, accepted);
}

/** One settle: every claimed-but-unsettled amount of `receiver` in `token` moves to it in one transfer. */
export function sendSettle(facilitator: Facilitator, network: string, receiver: string, token: string): Promise<SettleResponse> {
  const accepted = requirementsFor(network, receiver, token);
  return facilitator.settle({ x402Version: 2, accepted, payload: { type: 'settle', receiver, token } }, accepted);
}
