import type { Config } from '../../config/schema.ts';
import { usdToMicro } from '../../ledger/usd.ts';
import type { DecodedPayment } from '../decode.ts';
import { matchPayment, offerFor, type MatchedPayment } from '../match.ts';
import { buildOffers, buildUptoOffers, type Offer } from '../offers.ts';
import { buildChannelOffers } from '../channels/channel-offer.ts';
import { paidUsdc, pricePerRequest } from './price.ts';

type PaymentConfig = Pick<Config, 'payPerRequest' | 'topup'>;

/**
 * What one chat request is offered: its price and the exact offers asking for it, and with
 * payPerRequest.upto the upto offers for its reservation itself (a maximum, not rounded up: the
 * charge is settled afterwards), with payPerRequest.batchSettlement the channel offers for its
 * reservation (a voucher's ceiling), or nothing when the price is above the largest payment taken.
 */
export type RequestOffer =
  | { kind: 'over-limit' }
  | { kind: 'offered'; price: number; maxUsdc: number; offers: Offer[]; uptoOffers: Offer[]; uptoMinChargeUsdc: number; channelOffers: Offer[] };

/**
 * `uptoFacilitatorFor`: the address an upto witness binds per network (TopupService.uptoFacilitatorFor);
 * `channelAuthorizerFor`: a channel's receiver authorizer per network (channels/receiver-authorizer.ts).
 */
export function offerRequest(
  reservationUsdc: number,
  config: PaymentConfig,
  uptoFacilitatorFor: (network: string) => string | undefined = () => undefined,
  channelAuthorizerFor: (network: string) => string | undefined = () => undefined,
): RequestOffer {
  const minUsdc = usdToMicro(String(config.payPerRequest.minUsd));
  const price = pricePerRequest(reservationUsdc, minUsdc);
  const maxUsdc = usdToMicro(String(config.topup.maxUsd));
  if (price > maxUsdc) return { kind: 'over-limit' };
  const uptoOffers = config.payPerRequest.upto ? buildUptoOffers(config.topup, reservationUsdc, uptoFacilitatorFor) : [];
  // An upto request that is charged anything pays at least what an exact payment does (its
  // settle's gas is the relayer's), but never more than the maximum it signed: metered/bill.ts.
  const uptoMinChargeUsdc = Math.min(minUsdc, reservationUsdc);
  const channelOffers = buildChannelOffers(config, reservationUsdc, channelAuthorizerFor);
  return { kind: 'offered', price, maxUsdc, offers: buildOffers(config.topup, price), uptoOffers, uptoMinChargeUsdc, channelOffers };
}

/** A v2 payment for the upto scheme (v1 has no upto). */
export const isUpto = (decoded: DecodedPayment) =>
  decoded.envelope.x402Version === 2 && (decoded.envelope as { accepted: { scheme: string } }).accepted.scheme === 'upto';

/** Whether a payment sent with a request pays for it: matched against an offer the server builds itself, or why not. */
export type PaidPayment = { kind: 'answers-no-offer' } | { kind: 'insufficient'; paid: number } | { kind: 'matched'; matched: MatchedPayment };

export function matchPaidPayment(decoded: DecodedPayment, offer: Extract<RequestOffer, { kind: 'offered' }>, config: PaymentConfig): PaidPayment {
  // An upto payment answers an upto entry exactly (match.ts checks every term, the maximum included).
  if (isUpto(decoded) && offer.uptoOffers.length > 0) return { kind: 'matched', matched: { ...matchPayment(decoded, offer.uptoOffers), purpose: 'chat' } };
  const paid = paidUsdc(decoded, offerFor(decoded, offer.offers));
  if (paid === null || paid > offer.maxUsdc) return { kind: 'answers-no-offer' };
  if (paid < offer.price) return { kind: 'insufficient', paid };
  // A payment above the price (the body got cheaper since its 402) is taken whole: every term is
  // still checked against an offer the server builds itself, and the rest stays in the balance.
  const offers = paid === offer.price ? offer.offers : buildOffers(config.topup, paid);
  return { kind: 'matched', matched: { ...matchPayment(decoded, offers), purpose: 'chat' } };
}
