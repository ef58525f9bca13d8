import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { priceRequest, reservationFor } from '../../src/providers/pricing.ts';

/** Prices with up to 6 decimals, as an operator writes them, plus their value in millionths. */
const price = fc.tuple(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 999_999 })).map(([whole, frac]) => ({
  text: frac === 0 ? String(whole) : `${whole}.${String(frac).padStart(6, '0').replace(/0+$/, '')}`,
  millionths: BigInt(whole) * 1_000_000n + BigInt(frac),
}));
const markup = fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 99 })).map(([w, f]) => ({ text: f ? `${w}.${String(f).padStart(2, '0')}` : String(w), hundredths: BigInt(w * 100 + f) }));
const tokens = fc.integer({ min: 0, max: 2_000_000 });

function model(pp: string, cp: string, m: string, listed?: { pp: string; cp: string }) {
  return buildCatalog({
    models: [{ provider: 'p', name: 'm', contextLength: 1_000_000, maxOutputTokens: 100_000, promptCostPer1M: pp, completionCostPer1M: cp, promptPricePer1M: listed?.pp, completionPricePer1M: listed?.cp, reasoningFamily: 'none', created: 0 }],
    pricing: { markupPercent: m, listedPrices: 'billed' },
  }).models[0]!;
}

/** Reference arithmetic written independently: everything scaled to integers, one ceiling. */
function referenceCharge(p: bigint, c: bigint, pp: bigint, cp: bigint, hundredths: bigint): bigint {
  const num = (p * pp + c * cp) * (10_000n + hundredths); // price millionths × (1 + markup%) in 1/10000
  const den = 1_000_000n * 10_000n;
  return (num + den - 1n) / den;
}

describe('billing arithmetic (property tests)', () => {
  test('the charge is the exact cost with markup, rounded up once, never negative', () => {
    fc.assert(
      fc.property(price, price, markup, tokens, tokens, (pp, cp, m, p, c) => {
        const { chargeUsdc, costUsdc } = priceRequest(model(pp.text, cp.text, m.text), { promptTokens: p, completionTokens: c });
        assert.equal(BigInt(chargeUsdc), referenceCharge(BigInt(p), BigInt(c), pp.millionths, cp.millionths, m.hundredths));
        assert.equal(BigInt(costUsdc), referenceCharge(BigInt(p), BigInt(c), pp.millionths, cp.millionths, 0n));
        assert.ok(chargeUsdc >= 0 && Number.isSafeInteger(chargeUsdc));
        assert.ok(chargeUsdc >= costUsdc, 'a markup never bills below cost');
      }),
      { numRuns: 2000 },
    );
  });

  test('rounding happens once: the charge is within one micro-USDC above the exact amount', () => {
    fc.assert(
      fc.property(price, price, markup, tokens, tokens, (pp, cp, m, p, c) => {
        const { chargeUsdc } = priceRequest(model(pp.text, cp.text, m.text), { promptTokens: p, completionTokens: c });
        const exactTimesDen = (BigInt(p) * pp.millionths + BigInt(c) * cp.millionths) * (10_000n + m.hundredths);
        const den = 1_000_000n * 10_000n;
        assert.ok(BigInt(chargeUsdc) * den >= exactTimesDen);
        assert.ok((BigInt(chargeUsdc) - 1n) * den < exactTimesDen || chargeUsdc === 0);
      }),
      { numRuns: 1000 },
    );
  });

  test('listed-price mode bills the listed price exactly, whatever the markup', () => {
    fc.assert(
      fc.property(price, price, price, price, markup, tokens, tokens, (pp, cp, lp, lc, m, p, c) => {
        const { chargeUsdc } = priceRequest(model(pp.text, cp.text, m.text, { pp: lp.text, cp: lc.text }), { promptTokens: p, completionTokens: c });
        assert.equal(BigInt(chargeUsdc), referenceCharge(BigInt(p), BigInt(c), lp.millionths, lc.millionths, 0n));
      }),
      { numRuns: 1000 },
    );
  });

  test('the reservation covers any usage within its bounds', () => {
    fc.assert(
      fc.property(price, price, markup, fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 1, max: 16 }), (pp, cp, m, bound, maxTokens, n) => {
        const mdl = model(pp.text, cp.text, m.text);
        const reserved = reservationFor(mdl, bound, maxTokens, n);
        const worst = priceRequest(mdl, { promptTokens: bound, completionTokens: n * maxTokens }).chargeUsdc;
        assert.ok(reserved >= worst && reserved >= 1);
      }),
      { numRuns: 1000 },
    );
  });

  test('charges grow with tokens', () => {
    fc.assert(
      fc.property(price, price, markup, tokens, tokens, fc.integer({ min: 0, max: 1000 }), (pp, cp, m, p, c, more) => {
        const mdl = model(pp.text, cp.text, m.text);
        assert.ok(priceRequest(mdl, { promptTokens: p + more, completionTokens: c }).chargeUsdc >= priceRequest(mdl, { promptTokens: p, completionTokens: c }).chargeUsdc);
      }),
      { numRuns: 500 },
    );
  });
});
