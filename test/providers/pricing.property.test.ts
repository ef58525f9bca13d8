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
const markup = fc
  .tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 99 }))
  .map(([w, f]) => ({ text: f ? `${w}.${String(f).padStart(2, '0')}` : String(w), hundredths: BigInt(w * 100 + f) }));
const tokens = fc.integer({ min: 0, max: 2_000_000 });

function model(pp: string, cp: string, m: string, listed?: { pp: string; cp: string }) {
  return buildCatalog({
    models: [
      {
        provider: 'p',
        name: 'm',
        contextLength: 1_000_000,
        maxOutputTokens: 100_000,
        promptCostPer1M: pp,
        completionCostPer1M: cp,
        promptPricePer1M: listed?.pp,
        completionPricePer1M: listed?.cp,
        reasoningFamily: 'none',
        created: 0,
      },
    ],
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
      fc.property(
        price,
        price,
        markup,
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 1, max: 4096 }),
        fc.integer({ min: 1, max: 16 }),
        (pp, cp, m, bound, maxTokens, n) => {
          const mdl = model(pp.text, cp.text, m.text);
          const reserved = reservationFor(mdl, bound, maxTokens, n);
          const worst = priceRequest(mdl, { promptTokens: bound, completionTokens: n * maxTokens }).chargeUsdc;
          assert.ok(reserved >= worst && reserved >= 1);
        },
      ),
      { numRuns: 1000 },
    );
  });

  test('charges grow with tokens', () => {
    fc.assert(
      fc.property(price, price, markup, tokens, tokens, fc.integer({ min: 0, max: 1000 }), (pp, cp, m, p, c, more) => {
        const mdl = model(pp.text, cp.text, m.text);
        assert.ok(
          priceRequest(mdl, { promptTokens: p + more, completionTokens: c }).chargeUsdc >=
            priceRequest(mdl, { promptTokens: p, completionTokens: c }).chargeUsdc,
        );
      }),
      { numRuns: 500 },
    );
  });
});

/** A prompt split into its priced parts, and the usage that reports it (the prompt includes every part). */
const split = fc
  .tuple(fc.integer({ min: 0, max: 500_000 }), fc.integer({ min: 0, max: 500_000 }), fc.integer({ min: 0, max: 500_000 }), fc.integer({ min: 0, max: 500_000 }))
  .map(([uncached, cachedPrompt, cacheWrite, cacheRead]) => ({ uncached, cachedPrompt, cacheWrite, cacheRead }));
type Split = { uncached: number; cachedPrompt: number; cacheWrite: number; cacheRead: number };
const counts = (s: Split, completionTokens: number) => ({
  promptTokens: s.uncached + s.cachedPrompt + s.cacheWrite + s.cacheRead,
  completionTokens,
  cachedPromptTokens: s.cachedPrompt,
  cacheWriteTokens: s.cacheWrite,
  cacheReadTokens: s.cacheRead,
});
/** Costs (or listed prices) of the three cache parts; a missing one defaults to the prompt's. */
type CachePrices = { cached?: { text: string }; write?: { text: string }; read?: { text: string } };
const cachePrices = fc.record({
  cached: fc.option(price, { nil: undefined }),
  write: fc.option(price, { nil: undefined }),
  read: fc.option(price, { nil: undefined }),
});

function cacheModel(pp: string, cp: string, m: string, costs: CachePrices, listed: CachePrices = {}) {
  return buildCatalog({
    models: [
      {
        provider: 'p',
        name: 'm',
        contextLength: 1_000_000,
        maxOutputTokens: 100_000,
        promptCostPer1M: pp,
        completionCostPer1M: cp,
        reasoningFamily: 'none',
        created: 0,
        cachedPromptCostPer1M: costs.cached?.text,
        cacheWriteCostPer1M: costs.write?.text,
        cacheReadCostPer1M: costs.read?.text,
        cachedPromptPricePer1M: listed.cached?.text,
        cacheWritePricePer1M: listed.write?.text,
        cacheReadPricePer1M: listed.read?.text,
      },
    ],
    pricing: { markupPercent: m, listedPrices: 'billed' },
  }).models[0]!;
}

describe('cached-token prices (property tests)', () => {
  test('each cached part is billed at its own marked-up cost, rounded up once over the whole request', () => {
    fc.assert(
      fc.property(price, price, price, price, price, markup, split, tokens, (pp, cp, cached, write, read, m, s, c) => {
        const { chargeUsdc, costUsdc, cachedPartsIgnored } = priceRequest(cacheModel(pp.text, cp.text, m.text, { cached, write, read }), counts(s, c));
        // Independent arithmetic: every term in millionths of a micro-USDC, summed, one ceiling.
        const millionths =
          BigInt(s.uncached) * pp.millionths +
          BigInt(s.cachedPrompt) * cached.millionths +
          BigInt(s.cacheWrite) * write.millionths +
          BigInt(s.cacheRead) * read.millionths +
          BigInt(c) * cp.millionths;
        const ceilDiv = (num: bigint, den: bigint) => (num + den - 1n) / den;
        assert.equal(BigInt(chargeUsdc), ceilDiv(millionths * (10_000n + m.hundredths), 1_000_000n * 10_000n));
        assert.equal(BigInt(costUsdc), ceilDiv(millionths, 1_000_000n));
        assert.equal(cachedPartsIgnored, false);
      }),
      { numRuns: 1000 },
    );
  });

  test('listed cache prices are billed exactly, whatever the markup and the costs', () => {
    fc.assert(
      fc.property(price, price, cachePrices, price, price, price, markup, split, tokens, (pp, cp, costs, lcached, lwrite, lread, m, s, c) => {
        const mdl = cacheModel(pp.text, cp.text, m.text, costs, { cached: lcached, write: lwrite, read: lread });
        // Independent arithmetic in 1/10^10 micro-USDC: marked-up prompt and completion, listed cache parts as they are.
        const exact =
          (BigInt(s.uncached) * pp.millionths + BigInt(c) * cp.millionths) * (10_000n + m.hundredths) +
          (BigInt(s.cachedPrompt) * lcached.millionths + BigInt(s.cacheWrite) * lwrite.millionths + BigInt(s.cacheRead) * lread.millionths) * 10_000n;
        const den = 1_000_000n * 10_000n;
        const charge = BigInt(priceRequest(mdl, counts(s, c)).chargeUsdc);
        assert.equal(charge, (exact + den - 1n) / den);
      }),
      { numRuns: 500 },
    );
  });

  test('a model without cache prices bills any split exactly as a prompt-only request', () => {
    fc.assert(
      fc.property(price, price, markup, fc.boolean(), split, tokens, (pp, cp, m, listed, s, c) => {
        const mdl = listed ? model(pp.text, cp.text, m.text, { pp: cp.text, cp: pp.text }) : model(pp.text, cp.text, m.text);
        const usage = counts(s, c);
        const plain = priceRequest(mdl, { promptTokens: usage.promptTokens, completionTokens: c });
        const split = priceRequest(mdl, usage);
        assert.deepEqual({ charge: split.chargeUsdc, cost: split.costUsdc }, { charge: plain.chargeUsdc, cost: plain.costUsdc });
      }),
      { numRuns: 500 },
    );
  });

  test('the reservation bounds the charge for every split of every prompt within the bound, a dearer cache write included', () => {
    fc.assert(
      fc.property(
        price,
        price,
        cachePrices,
        cachePrices,
        markup,
        split,
        fc.integer({ min: 0, max: 200_000 }),
        fc.integer({ min: 1, max: 4096 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 32_768 }),
        (pp, cp, costs, listed, m, s, slack, maxTokens, n, c) => {
          const mdl = cacheModel(pp.text, cp.text, m.text, costs, listed);
          const usage = counts(s, Math.min(c, n * maxTokens));
          const reserved = reservationFor(mdl, usage.promptTokens + slack, maxTokens, n);
          assert.ok(reserved >= priceRequest(mdl, usage).chargeUsdc, 'every split of a prompt within the bound');
          const nonsense = { ...usage, cacheWriteTokens: usage.promptTokens + 1 };
          assert.ok(reserved >= priceRequest(mdl, nonsense).chargeUsdc, 'and a split that does not fit');
        },
      ),
      { numRuns: 1000 },
    );
  });

  test('the charge grows with every part: more prompt of any kind or more completion never costs less', () => {
    const part = fc.constantFrom('uncached', 'cachedPrompt', 'cacheWrite', 'cacheRead', 'completion');
    fc.assert(
      fc.property(
        price,
        price,
        cachePrices,
        cachePrices,
        markup,
        split,
        tokens,
        part,
        fc.integer({ min: 0, max: 10_000 }),
        (pp, cp, costs, listed, m, s, c, which, more) => {
          const mdl = cacheModel(pp.text, cp.text, m.text, costs, listed);
          const before = priceRequest(mdl, counts(s, c));
          const after = which === 'completion' ? priceRequest(mdl, counts(s, c + more)) : priceRequest(mdl, counts({ ...s, [which]: s[which] + more }, c));
          assert.ok(after.chargeUsdc >= before.chargeUsdc && after.costUsdc >= before.costUsdc);
        },
      ),
      { numRuns: 1000 },
    );
  });

  test('cached parts beyond the prompt are ignored (all prompt price, flagged), never a negative remainder', () => {
    fc.assert(
      fc.property(price, price, cachePrices, markup, split, fc.integer({ min: 1, max: 1000 }), tokens, (pp, cp, costs, m, s, excess, c) => {
        const mdl = cacheModel(pp.text, cp.text, m.text, costs);
        const usage = counts(s, c);
        const reported = { ...usage, cacheReadTokens: s.cacheRead + s.uncached + excess }; // parts = prompt + excess
        const priced = priceRequest(mdl, reported);
        const promptOnly = priceRequest(mdl, { promptTokens: reported.promptTokens, completionTokens: c });
        assert.equal(priced.cachedPartsIgnored, true);
        assert.deepEqual([priced.chargeUsdc, priced.costUsdc], [promptOnly.chargeUsdc, promptOnly.costUsdc]);
        assert.ok(priced.chargeUsdc >= 0);
      }),
      { numRuns: 500 },
    );
  });
});
