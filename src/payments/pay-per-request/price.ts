import { atomicAmount, type Offer } from '../offers.ts';
import { signedAmountAtomic, type DecodedPayment } from '../decode.ts';
import { microUsdcFor } from '../payment-terms.ts';

/**
 * What one pay-per-request call asks for: its reservation (the true upper bound of its charge)
 * rounded up to a whole multiple of `payPerRequest.minUsd`. The rounding keeps on-chain payments
 * few and small requests above the settlement's gas; what the request does not use stays in the
 * payer's balance. A free request still costs one step, so an offer is never for 0.
 */
export function pricePerRequest(reservationUsdc: number, stepUsdc: number): number {
  return Math.max(1, Math.ceil(reservationUsdc / stepUsdc)) * stepUsdc;
}

/**
 * The micro-USDC a payment carries in the token of the offer it names, or null when that is not a
 * whole number of micro-USDC (offers are only ever made in whole micro-USDC, so such a payment
 * answers none of them).
 */
export function paidUsdc(decoded: DecodedPayment, offer: Offer): number | null {
  const atomic = signedAmountAtomic(decoded);
  const micro = microUsdcFor(atomic, offer.config.decimals);
  if (!Number.isSafeInteger(micro) || atomicAmount(micro, offer.config.decimals) !== atomic) return null;
  return micro;
}
