import type { InternalUsage, Usage } from '../internal.ts';

/**
 * The cache fields some OpenAI-compatible providers add to OpenAI's usage object, in Anthropic's
 * names (proxies in front of Claude), and which the Anthropic translator's internal form carries
 * too (anthropic-messages/decode-usage.ts).
 */
interface CacheFields {
  cache_creation_input_tokens?: unknown;
  cache_read_input_tokens?: unknown;
}

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/**
 * OpenAI's usage object as the neutral Usage; null when it holds neither count (the gateway
 * estimates instead). Cached reads are `prompt_tokens_details.cached_tokens`, unless the provider
 * reports them in Anthropic's names: then those are the reads (also copied into `cached_tokens`
 * for OpenAI clients, so never counted twice) and `cache_creation_input_tokens` the writes.
 * Reasoning and cached tokens are parts of the totals, never added.
 */
export function readUsage(u: unknown): Usage | null {
  if (!u || typeof u !== 'object') return null;
  const o = u as InternalUsage & CacheFields;
  if (typeof o.prompt_tokens !== 'number' && typeof o.completion_tokens !== 'number') return null;
  const anthropicNames = typeof o.cache_creation_input_tokens === 'number' || typeof o.cache_read_input_tokens === 'number';
  return {
    input: {
      total: count(o.prompt_tokens),
      cacheRead: count(anthropicNames ? o.cache_read_input_tokens : o.prompt_tokens_details?.cached_tokens),
      cacheWrite: anthropicNames ? count(o.cache_creation_input_tokens) : 0,
    },
    output: { total: count(o.completion_tokens), reasoning: count(o.completion_tokens_details?.reasoning_tokens) },
    estimated: false,
  };
}
