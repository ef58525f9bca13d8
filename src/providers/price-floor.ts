import type { Config } from '../config/schema.ts';
import { StartupError } from '../startup-error.ts';
import { buildCatalog, type Catalog } from './catalog.ts';
import { toNumber, type Fraction } from './decimal.ts';
import { PRICE_PARTS, type TokenPrices } from './token-prices.ts';

/** Each billed part's listed-price key, and how an operator reads the part. */
const PART: Record<keyof TokenPrices, { key: string; name: string }> = {
  prompt: { key: 'promptPricePer1M', name: 'prompt tokens' },
  // Every provider type bills reasoning tokens as completion tokens, so this bounds them too.
  completion: { key: 'completionPricePer1M', name: 'completion tokens (reasoning included)' },
  cachedPrompt: { key: 'cachedPromptPricePer1M', name: 'cached prompt tokens' },
  cacheWrite: { key: 'cacheWritePricePer1M', name: 'cache writes' },
  cacheRead: { key: 'cacheReadPricePer1M', name: 'cache reads' },
};

const below = (a: Fraction, b: Fraction) => a.num * b.den < b.num * a.den;

/**
 * The first part a model bills below what one of its deployments costs, as the rest of a config
 * error (`models.2.cacheWritePricePer1M: …`), or null. A model bills one price whichever deployment
 * serves (a weighted draw or a fallback the client does not choose), so every part must cover the
 * dearest deployment, or some requests are sold at a loss. A derived price always does (the catalog
 * takes the dearest deployment's cost × markup); only a listed price can fall short.
 */
export function priceFloorProblem(catalog: Pick<Catalog, 'models'>): string | null {
  for (const [i, model] of catalog.models.entries()) {
    for (const part of PRICE_PARTS) {
      for (const deployment of model.deployments) {
        const billed = model.billed[part];
        const cost = deployment.cost[part];
        if (!below(billed, cost)) continue;
        const { key, name } = PART[part];
        const shortfall = `below the ${toNumber(cost)} its deployment ${deployment.id} (${deployment.upstream}) costs`;
        const fix = `so every request served there would lose money; set ${key} to at least ${toNumber(cost)}`;
        return `models.${i}.${key}: ${model.id} bills ${name} at ${toNumber(billed)} USD per 1M, ${shortfall}, ${fix}`;
      }
    }
  }
  return null;
}

/**
 * The catalog the gateway serves, refused at start-up (before any storage is opened) when a model
 * would bill some part below a deployment's cost: the operator fixes one price and starts again.
 */
export function pricedCatalog(config: Pick<Config, 'pricing' | 'models' | 'providers' | 'source'>): Catalog {
  const catalog = buildCatalog(config);
  const problem = priceFloorProblem(catalog);
  if (problem) throw new StartupError(`${config.source ?? 'config'}: ${problem}`);
  return catalog;
}
