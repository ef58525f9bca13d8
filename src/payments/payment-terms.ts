import { createHash } from 'node:crypto';
import { eip3009Payload, permit2Payload } from './decode.ts';
import type { MatchedPayment } from './match.ts';
import type { PaymentRow } from './payment-row.ts';

/**
 * What makes two submissions "the same payment": every term the payer signed, and the signature.
 * A payment's row is keyed by (network, asset, payer, nonce); anything else sent under that key is
 * another payment and is refused, whatever the row's status (a failed row reopened with new terms
 * could credit 10,000 USD for 1 USDC).
 */
export function termsDigest(m: MatchedPayment): string {
  const i = m.identity;
  // Re-parsed so that unknown keys and key order in the client's JSON do not matter.
  const inner = m.payload.payload;
  const signed =
    i.method === 'eip3009'
      ? (({ signature, authorization: a }) => [signature, a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce])(eip3009Payload.parse(inner))
      : // An upto witness's facilitator is signed too; exact payloads have none, so their digests are unchanged.
        (({ signature, permit2Authorization: p }) => [
          signature,
          p.from,
          p.permitted.token,
          p.permitted.amount,
          p.spender,
          p.nonce,
          p.deadline,
          p.witness.to,
          p.witness.validAfter,
          ...(p.witness.facilitator ? [p.witness.facilitator] : []),
        ])(permit2Payload.parse(inner));
  // Numbers as the chain reads them ("05" is 5), hex and addresses in one case.
  const canonical = [i.network, i.asset, i.method, ...signed].map((v) => (/^\d+$/.test(v) ? BigInt(v).toString() : v.toLowerCase())).join('\n');
  return createHash('sha256').update(canonical).digest('hex');
}

/** Micro-USDC for `atomic` token units of a token with `decimals` (≥ 6, see the offer schema). */
export function microUsdcFor(atomic: bigint, decimals: number): number {
  // Floor: never credit more than arrived. Offers ask for micro × 10^(decimals − 6) units and a
  // credit needs the on-chain amount to equal the recorded terms, so nothing is ever cut off in
  // practice; a fraction of a micro-USDC, if one ever arrived, stays with the operator.
  return Number(atomic / 10n ** BigInt(decimals - 6));
}

/** True when `m` is exactly the payment recorded in `row`. */
export function sameTerms(row: PaymentRow, m: MatchedPayment, digest: string): boolean {
  const i = m.identity;
  return (
    (row.terms_digest === null || row.terms_digest === digest) &&
    row.payload_digest === m.digest &&
    row.amount_atomic === i.amountAtomic &&
    Number(row.valid_before) === i.validBefore &&
    row.pay_to === i.payTo &&
    row.transfer_method === i.method
  );
}
