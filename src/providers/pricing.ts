import type { Usage } from '../protocols/internal.ts';
import type { CatalogModel } from './catalog.ts';
import { max, type Fraction } from './decimal.ts';
import type { TokenPrices } from './token-prices.ts';

/**
 * The usage a request is priced on. `promptTokens` is the whole prompt, cached parts included (as
 * OpenAI reports it); each cached part is priced at its own price instead of the prompt's:
 * - `cachedPromptTokens`: OpenAI-style cached reads (`prompt_tokens_details.cached_tokens`);
 * - `cacheWriteTokens` / `cacheReadTokens`: Anthropic's cache creation and cache read input tokens.
 * The parts are disjoint: a usage carries OpenAI's cached reads or Anthropic's, never both.
 */
export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
  cachedPromptTokens?: number;
  cacheWriteTokens?: number;
  cacheReadTokens?: number;
}

/**
 * A usage's priced parts. Cache reads go to the price their decoder named (`cacheReadPrice`:
 * OpenAI's cached-input price unless the reads were reported in Anthropic's terms). Every part is
 * given, zero when absent, so a log of the counts always names all three.
 */
export function tokenCounts(u: Usage): Required<TokenCounts> {
  const anthropic = u.input.cacheReadPrice === 'cacheRead';
  return {
    promptTokens: u.input.total,
    completionTokens: u.output.total,
    cachedPromptTokens: anthropic ? 0 : u.input.cacheRead,
    cacheWriteTokens: u.input.cacheWrite,
    cacheReadTokens: anthropic ? u.input.cacheRead : 0,
  };
}

export interface PricedRequest {
  /** What the wallet is charged, in micro-USDC. */
  chargeUsdc: number;
  /** What the provider costs us, in micro-USDC. */
  costUsdc: number;
  /**
   * The reported cached parts add up to more than the prompt, which no provider's bill can mean: the
   * request was priced as if nothing were cached (the prompt price for every prompt token, never a
   * negative uncached remainder), and the caller should log the usage for the operator.
   */
  cachedPartsIgnored: boolean;
}

/** The prompt split into its priced parts; all zero cached when the reported parts do not fit. */
function promptParts(t: TokenCounts): { uncached: number; cachedPrompt: number; cacheWrite: number; cacheRead: number; fits: boolean } {
  const cachedPrompt = t.cachedPromptTokens ?? 0;
  const cacheWrite = t.cacheWriteTokens ?? 0;
  const cacheRead = t.cacheReadTokens ?? 0;
  const cached = cachedPrompt + cacheWrite + cacheRead;
  if (cached > t.promptTokens || cachedPrompt < 0 || cacheWrite < 0 || cacheRead < 0) {
    return { uncached: t.promptTokens, cachedPrompt: 0, cacheWrite: 0, cacheRead: 0, fits: false };
  }
  return { uncached: t.promptTokens - cached, cachedPrompt, cacheWrite, cacheRead, fits: true };
}

/** A price list over one denominator (the least common one of its parts): each part's numerator scaled to it. */
type OnOneDenominator = { den: bigint } & Record<keyof TokenPrices, bigint>;

const gcd = (a: bigint, b: bigint): bigint => (b === 0n ? a : gcd(b, a % b));

/** Price lists are built once per model at start-up, so each is brought to one denominator once, not per request. */
const onOneDenominator = new WeakMap<TokenPrices, OnOneDenominator>();

function overOneDenominator(prices: TokenPrices): OnOneDenominator {
  const known = onOneDenominator.get(prices);
  if (known) return known;
  const fractions = [prices.prompt, prices.completion, prices.cachedPrompt, prices.cacheWrite, prices.cacheRead];
  const den = fractions.reduce((l, f) => (l * f.den) / gcd(l, f.den), 1n);
  const scaled = (f: Fraction) => f.num * (den / f.den);
  const result: OnOneDenominator = {
    den,
    prompt: scaled(prices.prompt),
    completion: scaled(prices.completion),
    cachedPrompt: scaled(prices.cachedPrompt),
    cacheWrite: scaled(prices.cacheWrite),
    cacheRead: scaled(prices.cacheRead),
  };
  onOneDenominator.set(prices, result);
  return result;
}

/**
 * The exact rational cost, rounded up once to a whole micro-USDC (the only rounding in billing):
 * Σ tokens × num/den over the parts, summed as integers over the list's common denominator, which is
 * the same number as summing the fractions, without a fraction built per part and request.
 */
function exactCost(prices: TokenPrices, t: TokenCounts): bigint {
  const p = promptParts(t);
  const one = overOneDenominator(prices);
  let sum = 0n;
  if (p.uncached) sum += BigInt(p.uncached) * one.prompt;
  if (p.cachedPrompt) sum += BigInt(p.cachedPrompt) * one.cachedPrompt;
  if (p.cacheWrite) sum += BigInt(p.cacheWrite) * one.cacheWrite;
  if (p.cacheRead) sum += BigInt(p.cacheRead) * one.cacheRead;
  if (t.completionTokens) sum += BigInt(t.completionTokens) * one.completion;
  return (sum + one.den - 1n) / one.den;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A cost as a number of micro-USDC, at most the largest safe integer (9 billion USD): usage a
 * provider over-reports past it (a sentinel, a unit mix-up) is above any balance either way, and the
 * bill charges what the balance allowed, as for any charge above the reservation. Unclamped, the
 * ledger refused the unsafe amount and a delivered stream was left to the sweeper, charged nothing.
 */
const safeAmount = (v: bigint): number => Number(v > MAX_SAFE ? MAX_SAFE : v);

/** What the wallet is charged and what the provider costs us, in micro-USDC. */
export function priceRequest(model: Pick<CatalogModel, 'billed' | 'cost'>, t: TokenCounts): PricedRequest {
  return {
    chargeUsdc: safeAmount(exactCost(model.billed, t)),
    costUsdc: safeAmount(exactCost(model.cost, t)),
    cachedPartsIgnored: !promptParts(t).fits,
  };
}

/**
 * The dearest price any prompt token can be billed at. Cached reads are usually cheaper than the
 * prompt, but a cache write is dearer (1.25× at Anthropic), and the reservation cannot know how the
 * provider will split the prompt: bounding every prompt token at the dearest price bounds any split.
 */
function dearestPromptPrice(p: TokenPrices): Fraction {
  return [p.cachedPrompt, p.cacheWrite, p.cacheRead].reduce(max, p.prompt);
}

const boundsOf = new WeakMap<TokenPrices, TokenPrices>();

/** The billed list with its prompt at the dearest prompt-side price, made once per list. */
function reservationPrices(billed: TokenPrices): TokenPrices {
  let bound = boundsOf.get(billed);
  if (!bound) {
    bound = { ...billed, prompt: dearestPromptPrice(billed) };
    boundsOf.set(billed, bound);
  }
  return bound;
}

/**
 * The amount locked before the provider is called: the billed price of an upper bound of the
 * prompt (each token at the dearest prompt-side price) plus every choice using all its output
 * tokens. At least 1 micro-USDC, so that even a free model goes through the same exactly-once
 * bookkeeping.
 */
export function reservationFor(model: CatalogModel, promptUpperBound: number, maxTokens: number, n: number): number {
  const amount = Number(exactCost(reservationPrices(model.billed), { promptTokens: promptUpperBound, completionTokens: n * maxTokens }));
  return Math.max(1, amount);
}
