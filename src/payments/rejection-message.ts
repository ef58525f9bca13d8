import { formatUnits } from 'viem';
import type { MatchedPayment } from './match.ts';

/** The facilitator's reasons for "the payer does not hold that much of the token" (x402 v2 and older wording). */
const LACKS_FUNDS = /insufficient_(balance|funds)/;

/**
 * What a payer whose payment was refused should do next. "Sign a new payment" is no help to a
 * wallet that lacks the tokens: a new signature fails the same way until it is funded.
 */
/**
 * Reasons under which the payer's money has moved, or may be moving, for this authorization (the
 * payment recorded under its nonce settled or is settling): never answered with "sign a new
 * payment", which would have them pay twice.
 */
const DO_NOT_PAY_AGAIN = /Do not pay again/;
export const mustNotPayAgain = (reason: string) => DO_NOT_PAY_AGAIN.test(reason);

export function rejectionMessage(reason: string, matched: MatchedPayment): string {
  if (mustNotPayAgain(reason)) return reason;
  if (LACKS_FUNDS.test(reason)) {
    const { payer, amountAtomic, asset, network } = matched.identity;
    const { name: token, decimals } = matched.offer.config;
    return `the paying wallet ${payer} does not hold ${formatUnits(BigInt(amountAtomic), decimals)} ${token} (${asset} on ${network}); nothing was credited. Add ${token} to that wallet, or pay with another of accepts`;
  }
  return `the payment was rejected (${reason}); nothing was credited. Sign a new payment for one of accepts`;
}
