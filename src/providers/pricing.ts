import type { CatalogModel, TokenPrices } from './catalog.ts';
import { add, ceil, fromInt, mul } from './decimal.ts';

export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
}

function exactCost(prices: TokenPrices, t: TokenCounts): bigint {
  // The only rounding in billing: the exact rational cost, rounded up once to a whole micro-USDC.
  return ceil(add(mul(fromInt(t.promptTokens), prices.prompt), mul(fromInt(t.completionTokens), prices.completion)));
}

/** What the wallet is charged and what the provider costs us, in micro-USDC. */
export function priceRequest(model: CatalogModel, t: TokenCounts): { chargeUsdc: number; costUsdc: number } {
  return { chargeUsdc: Number(exactCost(model.billed, t)), costUsdc: Number(exactCost(model.cost, t)) };
}

/**
 * The amount locked before the provider is called: the billed price of an upper bound of the
 * prompt plus every choice using all its output tokens. At least 1 micro-USDC, so that even a free
 * model goes through the same exactly-once bookkeeping.
 */
export function reservationFor(model: CatalogModel, promptUpperBound: number, maxTokens: number, n: number): number {
  const amount = Number(exactCost(model.billed, { promptTokens: promptUpperBound, completionTokens: n * maxTokens }));
  return Math.max(1, amount);
}
