import type { ModelConfig, ProviderConfig } from '../config/schema.ts';
import { max, mul, parseDecimal, toNumber, type Fraction } from './decimal.ts';

/**
 * Per-token prices in micro-USDC (a price of P USD per 1M tokens is exactly P micro-USDC per token).
 * The three cache prices apply to parts of the prompt that providers report apart:
 * - `cachedPrompt`: OpenAI-style cached reads (`prompt_tokens_details.cached_tokens`);
 * - `cacheWrite`: Anthropic's cache creation input tokens (priced above input, 1.25× at Anthropic);
 * - `cacheRead`: Anthropic's cache read input tokens.
 */
export interface TokenPrices {
  prompt: Fraction;
  completion: Fraction;
  cachedPrompt: Fraction;
  cacheWrite: Fraction;
  cacheRead: Fraction;
}

type CachePart = 'cachedPrompt' | 'cacheWrite' | 'cacheRead';

/** The config keys of one price: `<part>CostPer1M` (what the provider charges) and `<part>PricePer1M` (listed). */
type PriceKeys = Pick<ModelConfig, `${CachePart | 'prompt' | 'completion'}${'Cost' | 'Price'}Per1M`>;

const parsed = (text: string | undefined): Fraction | undefined => (text === undefined ? undefined : parseDecimal(text));

/**
 * What a provider type charges for a cache write, relative to its prompt price, when the model
 * leaves the cache-write cost out. Anthropic bills every cache write (the only kind it reports)
 * at 1.25× input for the 5-minute TTL (one-hour writes are refused): taking the prompt price
 * instead would bill a write below what the operator pays for it whenever the markup is under 25%.
 */
const CACHE_WRITE_FACTOR: Partial<Record<ProviderConfig['type'], Fraction>> = { anthropic: { num: 5n, den: 4n } };

/**
 * What the provider charges us and what we bill, for one model. A billed price is the listed price
 * when the model sets one, else cost × (1 + markup). A cache price left out entirely (neither cost
 * nor price) is the prompt's, on both sides, so a model without cache prices bills exactly as a
 * prompt-only request would; a cache cost without a listed price is marked up like any cost. The
 * exception is a provider type whose cache writes are known to cost more than its prompt
 * (CACHE_WRITE_FACTOR): a write left out is the prompt's price times that factor, on both sides.
 */
export function modelPrices(
  m: PriceKeys,
  markup: Fraction,
  providerType: ProviderConfig['type'] = 'openai-compatible',
): { cost: TokenPrices; billed: TokenPrices } {
  const promptCost = parseDecimal(m.promptCostPer1M);
  // Absent only for an embedding model, which produces no completion tokens (config/schema.ts).
  const completionCost = parseDecimal(m.completionCostPer1M ?? '0');
  const billedPrompt = parsed(m.promptPricePer1M) ?? mul(promptCost, markup);
  const cachePart = (part: CachePart) => {
    const partCost = parsed(m[`${part}CostPer1M`]);
    const factor = part === 'cacheWrite' && !partCost ? CACHE_WRITE_FACTOR[providerType] : undefined;
    if (factor) return { cost: mul(promptCost, factor), billed: parsed(m.cacheWritePricePer1M) ?? mul(billedPrompt, factor) };
    return { cost: partCost ?? promptCost, billed: parsed(m[`${part}PricePer1M`]) ?? (partCost ? mul(partCost, markup) : billedPrompt) };
  };
  const [cachedPrompt, cacheWrite, cacheRead] = [cachePart('cachedPrompt'), cachePart('cacheWrite'), cachePart('cacheRead')];
  return {
    cost: { prompt: promptCost, completion: completionCost, cachedPrompt: cachedPrompt.cost, cacheWrite: cacheWrite.cost, cacheRead: cacheRead.cost },
    billed: {
      prompt: billedPrompt,
      completion: parsed(m.completionPricePer1M) ?? mul(completionCost, markup),
      cachedPrompt: cachedPrompt.billed,
      cacheWrite: cacheWrite.billed,
      cacheRead: cacheRead.billed,
    },
  };
}

/** The parts of a price list, in the order a bill and an error name them. */
export const PRICE_PARTS = ['prompt', 'completion', 'cachedPrompt', 'cacheWrite', 'cacheRead'] as const satisfies readonly (keyof TokenPrices)[];

/** Each part's highest price among the lists: what bills every part at or above each of them. */
export function dearestPrices(lists: readonly TokenPrices[]): TokenPrices {
  const [first, ...rest] = lists;
  if (!first) throw new RangeError('dearestPrices needs at least one price list');
  return Object.fromEntries(PRICE_PARTS.map((part) => [part, rest.reduce((best, l) => max(best, l[part]), first[part])])) as unknown as TokenPrices;
}

/** The prices /v1/models shows, USD per 1M tokens (display only; `promptPricePer1MTokens` is the spec's name). */
export function listedPrices(p: TokenPrices) {
  return {
    promptPricePer1MTokens: toNumber(p.prompt),
    completionPricePer1M: toNumber(p.completion),
    cachedPromptPricePer1M: toNumber(p.cachedPrompt),
    cacheWritePricePer1M: toNumber(p.cacheWrite),
    cacheReadPricePer1M: toNumber(p.cacheRead),
  };
}
