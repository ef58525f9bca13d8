import type { Usage } from '../internal.ts';

/**
 * The usage object of the internal form (OpenAI's, as every upstream translator produces it) as the
 * gateway's Usage. The cached parts of the prompt, as the pricing reads them (src/providers/pricing.ts):
 * - OpenAI and compatible providers report cached reads as `prompt_tokens_details.cached_tokens`;
 * - the Anthropic translator (anthropic-messages/decode-usage.ts) adds `cache_creation_input_tokens`
 *   and `cache_read_input_tokens`, and also copies the reads into `cached_tokens` for OpenAI clients.
 * When the Anthropic fields are there, the cached reads are Anthropic's, priced as cache reads and
 * not a second time as OpenAI cached reads.
 */
export interface CacheParts {
  /** Cached prompt reads of either kind: what the usage row's cached_tokens records. */
  cachedTokens: number;
  cachedPromptTokens: number;
  cacheWriteTokens: number;
  cacheReadTokens: number;
}

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

export function readCacheParts(usage: Record<string, any>): CacheParts {
  const openaiCached = count(usage.prompt_tokens_details?.cached_tokens);
  const anthropic = typeof usage.cache_creation_input_tokens === 'number' || typeof usage.cache_read_input_tokens === 'number';
  if (!anthropic) return { cachedTokens: openaiCached, cachedPromptTokens: openaiCached, cacheWriteTokens: 0, cacheReadTokens: 0 };
  const cacheReadTokens = count(usage.cache_read_input_tokens);
  return { cachedTokens: cacheReadTokens, cachedPromptTokens: 0, cacheWriteTokens: count(usage.cache_creation_input_tokens), cacheReadTokens };
}

/**
 * Reads OpenAI's usage object (and the Anthropic translator's cache fields, see readCacheParts).
 * Reasoning and cached tokens are parts of the totals, never added.
 */
export function readUsage(u: unknown): Usage | null {
  if (!u || typeof u !== 'object') return null;
  const o = u as Record<string, any>;
  if (typeof o.prompt_tokens !== 'number' && typeof o.completion_tokens !== 'number') return null;
  return {
    promptTokens: count(o.prompt_tokens),
    completionTokens: count(o.completion_tokens),
    reasoningTokens: count(o.completion_tokens_details?.reasoning_tokens),
    ...readCacheParts(o),
    estimated: false,
  };
}
