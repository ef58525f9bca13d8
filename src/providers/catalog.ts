import type { Config, ModelConfig, ProviderConfig } from '../config/schema.ts';
import type { ProviderType } from './registry.ts';
import { markupFactor } from './decimal.ts';
import type { TokenizerFamily } from '../config/schema.ts';
import { dearestPrices, listedPrices, modelPrices, type TokenPrices } from './token-prices.ts';

export interface CatalogModel {
  /** `<provider>/<name>`, the id clients use and /v1/models lists. */
  id: string;
  name: string;
  provider: string;
  /** The provider's type, which says how requests to it are encoded (providers/registry.ts). */
  upstream: ProviderType;
  upstreamName: string;
  /** What the model is served for: chat requests, or POST /v1/embeddings (models[].type). */
  type: ModelConfig['type'];
  /** For an embedding model: the most tokens one input may have (the provider refuses longer ones). */
  contextLength: number;
  /** For an embedding model: its vector size as configured (models[].dimensions); src/embeddings/native-dimensions.ts knows the rest. */
  dimensions: number | undefined;
  maxOutputTokens: number;
  reasoningFamily: ModelConfig['reasoningFamily'];
  created: number;
  /**
   * Non-text content the model accepts, with the most prompt tokens one such part can cost. A kind
   * missing here is refused with 400; a listed one is reserved at its bound.
   */
  partTokenBounds: Readonly<Partial<Record<PartKind, number>>>;
  /** Bare names that resolve to this model besides its own (models[].aliases). */
  aliases: readonly string[];
  /** The balance fit is on for every request to this model (models[].fitMaxTokens). */
  fitMaxTokens: boolean;
  /** The provider's extension fields the operator chose to forward as sent. */
  extraFields: ReadonlySet<string>;
  /** What the provider charges us. */
  cost: TokenPrices;
  /**
   * What we bill, whichever deployment serves: per part, the listed price, or the dearest
   * deployment's cost × (1 + markup) (src/providers/token-prices.ts).
   */
  billed: TokenPrices;
  /**
   * Where the model is served, in the order tried: the model's own provider first, then its
   * `fallbacks` (src/routing/). Clients pay `billed` whichever serves; each has its own cost, never above `billed`.
   */
  deployments: readonly Deployment[];
}

/** One place a model is served: a configured provider and the model's name there. */
export interface Deployment {
  /** `<provider>/<upstreamName>`: how logs, metrics, usage rows and `x-tollgate-deployment` name it. */
  id: string;
  provider: string;
  upstream: ProviderType;
  upstreamName: string;
  /** What this provider charges us, for the platform's cost and revenue. */
  cost: TokenPrices;
  /** Its share of the load among adjacent weighted deployments (src/routing/order.ts). */
  weight?: number;
  /** The OpenAI tokenizer this provider bills with (models[].tokenizer); absent: the prompt bound stays at bytes. */
  tokenizer?: TokenizerFamily;
}

export type PartKind = 'image' | 'audio' | 'file';

export interface Catalog {
  models: CatalogModel[];
  byId: Map<string, CatalogModel>;
  /** Bare model name → every model with that name, for `model: "gpt-4o"` requests. */
  byName: Map<string, CatalogModel[]>;
  listedPrices: 'billed' | 'cost';
}

/** A model as the catalog reads it: `type` may be left out (a chat model), as in a config file. */
type CatalogInput = Omit<ModelConfig, 'type'> & { type?: ModelConfig['type'] };

export function buildCatalog(config: Pick<Config, 'pricing'> & { models: CatalogInput[]; providers?: Record<string, ProviderConfig> }): Catalog {
  const factor = markupFactor(config.pricing.markupPercent);
  const models = config.models.map((m): CatalogModel => {
    const upstream = config.providers?.[m.provider]?.type ?? 'openai-compatible';
    const prices = modelPrices(m, factor, upstream);
    const own: Deployment = {
      id: `${m.provider}/${m.upstreamName ?? m.name}`,
      provider: m.provider,
      upstream,
      upstreamName: m.upstreamName ?? m.name,
      cost: prices.cost,
      ...(m.weight ? { weight: m.weight } : {}),
      ...(m.tokenizer ? { tokenizer: m.tokenizer } : {}),
    };
    const billedByDeployment = [prices.billed];
    const fallbacks = (m.fallbacks ?? []).map((f): Deployment => {
      const type = config.providers?.[f.provider]?.type ?? 'openai-compatible';
      const upstreamName = f.upstreamName ?? own.upstreamName;
      // Each cost the fallback leaves out is the model's, priced by the fallback's own type (an
      // Anthropic fallback's cache writes cost 1.25× its prompt whatever the model's type is).
      const costs = { ...m, ...Object.fromEntries(Object.entries(f).filter(([k, v]) => k.endsWith('CostPer1M') && v !== undefined)) };
      const fallbackPrices = modelPrices(costs, factor, type);
      billedByDeployment.push(fallbackPrices.billed);
      return {
        id: `${f.provider}/${upstreamName}`,
        provider: f.provider,
        upstream: type,
        upstreamName,
        cost: fallbackPrices.cost,
        ...(f.weight ? { weight: f.weight } : {}),
        ...(f.tokenizer ? { tokenizer: f.tokenizer } : {}),
      };
    });
    return {
      id: `${m.provider}/${m.name}`,
      name: m.name,
      provider: m.provider,
      upstream,
      upstreamName: m.upstreamName ?? m.name,
      type: m.type ?? 'chat',
      contextLength: m.contextLength,
      dimensions: m.dimensions,
      maxOutputTokens: m.maxOutputTokens,
      reasoningFamily: m.reasoningFamily,
      created: m.created,
      partTokenBounds: { ...m.partTokenBounds },
      aliases: m.aliases ?? [],
      fitMaxTokens: m.fitMaxTokens ?? false,
      extraFields: new Set(config.providers?.[m.provider]?.extraFields ?? []),
      cost: prices.cost,
      // One price whichever deployment serves, set by the dearest: each part's listed price, or the
      // highest of the deployments' cost × markup (src/providers/price-floor.ts refuses a listed price
      // below any deployment's cost).
      billed: dearestPrices(billedByDeployment),
      deployments: [own, ...fallbacks],
    };
  });
  const byName = new Map<string, CatalogModel[]>();
  // An alias is one more bare name: a name two models answer to is ambiguous, as for names.
  for (const m of models) for (const name of new Set([m.name, ...m.aliases])) byName.set(name, [...(byName.get(name) ?? []), m]);
  return { models, byId: new Map(models.map((m) => [m.id, m])), byName, listedPrices: config.pricing.listedPrices };
}

/**
 * A model by full id (`provider/name`) or by bare name when one provider alone offers it. Both
 * chat and GET /v1/models/{id} use it, so they accept the same ids.
 */
export type ModelLookup = { found: CatalogModel } | { ambiguous: string[] } | { unknown: true };

export function findModel(catalog: Catalog, requested: string): ModelLookup {
  const exact = catalog.byId.get(requested);
  if (exact) return { found: exact };
  const byName = catalog.byName.get(requested) ?? [];
  if (byName.length === 1) return { found: byName[0]! };
  if (byName.length > 1) return { ambiguous: byName.map((m) => m.id) };
  return { unknown: true };
}

/** The /v1/models entry: the spec's fields plus what the OpenAI SDK's Model type expects. */
export function modelEntry(catalog: Catalog, m: CatalogModel) {
  return {
    id: m.id,
    object: 'model' as const,
    created: m.created,
    owned_by: m.provider,
    name: m.name,
    // `chat` or `embedding`: which endpoint serves it (an embedding model's completion price is 0).
    type: m.type,
    provider: m.provider,
    contextLength: m.contextLength,
    maxOutputTokens: m.maxOutputTokens,
    ...listedPrices(catalog.listedPrices === 'cost' ? m.cost : m.billed),
  };
}
