import type { Config } from '../../config/schema.ts';
import { usdToMicro } from '../../ledger/usd.ts';
import type { DecodedPayment } from '../decode.ts';
import { matchPayment, offerFor, type MatchedPayment } from '../match.ts';
import { buildOffers, type Offer } from '../offers.ts';
import { paidUsdc, pricePerRequest } from './price.ts';

type PaymentConfig = Pick<Config, 'payPerRequest' | 'topup'>;

/** What one chat request is offered: its price and the offers asking for it, or nothing when the price is above the largest payment taken. */
export type RequestOffer = { kind: 'over-limit' } | { kind: 'offered'; price: number; maxUsdc: number; offers: Offer[] };

export function offerRequest(reservationUsdc: number, config: PaymentConfig): RequestOffer {
  const price = pricePerRequest(reservationUsdc, usdToMicro(String(config.payPerRequest.minUsd)));
  const maxUsdc = usdToMicro(String(config.topup.maxUsd));
  if (price > maxUsdc) return { kind: 'over-limit' };
  return { kind: 'offered', price, maxUsdc, offers: buildOffers(config.topup, price) };
}

/** Whether a payment sent with a request pays for it: matched against an offer the server builds itself, or why not. */
export type PaidPayment = { kind: 'answers-no-offer' } | { kind: 'insufficient'; paid: number } | { kind: 'matched'; matched: MatchedPayment };

export function matchPaidPayment(decoded: DecodedPayment, offer: Extract<RequestOffer, { kind: 'offered' }>, config: PaymentConfig): PaidPayment {
  const paid = paidUsdc(decoded, offerFor(decoded, offer.offers));
  if (paid === null || paid > offer.maxUsdc) return { kind: 'answers-no-offer' };
  if (paid < offer.price) return { kind: 'insufficient', paid };
  // A payment above the price (the body got cheaper since its 402) is taken whole: every term is
  // still checked against an offer the server builds itself, and the rest stays in the balance.
  const offers = paid === offer.price ? offer.offers : buildOffers(config.topup, paid);
  return { kind: 'matched', matched: { ...matchPayment(decoded, offers), purpose: 'chat' } };
}
