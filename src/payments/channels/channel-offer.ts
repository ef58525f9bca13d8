import type { PaymentRequirements } from '@x402/core/types';
import type { Config } from '../../config/schema.ts';
import { usdToMicro } from '../../ledger/usd.ts';
import { buildOffers, type Offer } from '../offers.ts';
import type { BoundChannelPayment } from './channel-binding.ts';
import type { ChannelRow } from './channel-store.ts';
import { snapshotOf } from './channel-store.ts';
import { CHANNEL_ERRORS } from './channel-types.ts';

/** The scheme name x402 gives channels. */
export const BATCH_SETTLEMENT = 'batch-settlement';

/**
 * The `batch-settlement` entries of a pay-per-request 402 (payPerRequest.batchSettlement), one per
 * offer whose asset has 6 decimals (the channel's amounts are then micro-USDC, the ledger's unit) on
 * a network whose receiver authorizer is known. `amount` is the request's reservation itself: the
 * ceiling its voucher adds, of which the request is charged its actual cost. The extra fields are
 * the ones the spec and the stock client read: receiverAuthorizer, withdrawDelay, the token's
 * EIP-712 name and version, minDeposit (never below the amount) and how deposits are authorized.
 */
export function buildChannelOffers(
  config: Pick<Config, 'payPerRequest' | 'topup'>,
  micro: number,
  authorizerFor: (network: string) => string | undefined,
): Offer[] {
  const bs = config.payPerRequest.batchSettlement;
  if (!bs.enabled) return [];
  const minDeposit = Math.max(usdToMicro(String(bs.minDepositUsd)), micro);
  return buildOffers(config.topup, micro).flatMap(({ config: offer, requirements }) => {
    const receiverAuthorizer = authorizerFor(offer.network);
    if (offer.decimals !== 6 || receiverAuthorizer === undefined) return [];
    const extra = {
      receiverAuthorizer,
      withdrawDelay: bs.withdrawDelaySeconds,
      name: offer.name,
      version: offer.version,
      minDeposit: String(minDeposit),
      assetTransferMethod: offer.transferMethod,
    };
    return [{ config: offer, requirements: { ...requirements, scheme: BATCH_SETTLEMENT, extra } }];
  });
}

/** The spec's channel snapshot with the server's charged amount: what a receipt and a corrective 402 carry. */
export function channelStateOf(row: ChannelRow, chargedUsdc = row.charged_usdc) {
  const s = snapshotOf(row);
  return {
    channelId: s.channelId,
    balance: String(s.balance),
    totalClaimed: String(s.totalClaimed),
    withdrawRequestedAt: s.withdrawRequestedAt,
    refundNonce: s.refundNonce,
    chargedCumulativeAmount: String(chargedUsdc),
  };
}

/**
 * What a corrective 402 says of the channel: the charged amount the client's next voucher adds this
 * request's ceiling to, and a voucher of the payer's at or above it, which the stock client checks
 * against its own key before it adopts that amount.
 */
export interface StatedChannel {
  chargedUsdc: number;
  voucher: { maxUsdc: number; signature: string } | null;
}

/** The channel as it is: its charged amount and its latest signed voucher. */
export const statedAsIs = (row: ChannelRow): StatedChannel => ({
  chargedUsdc: row.charged_usdc,
  voucher: row.signature === null || row.signed_max_usdc === null ? null : { maxUsdc: row.signed_max_usdc, signature: row.signature },
});

/**
 * The corrective entry (spec, "Corrective 402"): the offer the payment answered, with the channel's
 * state and a signed voucher, so the stock client verifies that signature against its own key,
 * adopts the stated charged amount and signs again.
 */
export function correctiveOffer(offer: Offer, row: ChannelRow, stated = statedAsIs(row)): Offer {
  const { voucher } = stated;
  const voucherState = voucher === null ? {} : { voucherState: { signedMaxClaimable: String(voucher.maxUsdc), signature: voucher.signature } };
  const extra = { ...(offer.requirements.extra as Record<string, unknown>), channelState: channelStateOf(row, stated.chargedUsdc), ...voucherState };
  return { ...offer, requirements: { ...offer.requirements, extra } as PaymentRequirements & { maxAmountRequired: string } };
}

/**
 * Why a deposit is refused for being below the offer's `extra.minDeposit`, or null. Every deposit is
 * a transaction the gateway's facilitator pays gas for: a client depositing only each request's
 * ceiling would cost one per request, which channels exist to avoid (the spec lets a server refuse
 * deposits below its announced minimum). The stock client's default deposit is never below it.
 */
export function depositBelowMinimum(bound: BoundChannelPayment): string | null {
  if (bound.inner.type !== 'deposit') return null;
  const minDeposit = Number((bound.requirements.extra as { minDeposit: string }).minDeposit);
  const amount = Number(bound.inner.deposit.amount);
  if (amount >= minDeposit) return null;
  return `${CHANNEL_ERRORS.belowMinDeposit}: the deposit of ${amount} is below this gateway's minimum of ${minDeposit} (accepts[].extra.minDeposit); deposit at least that`;
}
