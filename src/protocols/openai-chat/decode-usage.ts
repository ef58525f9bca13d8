import type { Usage } from '../internal.ts';
import { openAIUsageFields } from './schemas.ts';

/** A reported count as whole tokens: a negative or fractional count never bills below zero or in parts. */
const count = (v: number | undefined): number => (v !== undefined && v >= 0 ? Math.floor(v) : 0);

/** A main count the bill can use: a number of tokens, not negative. */
const usable = (v: number | undefined): boolean => v !== undefined && v >= 0;

/**
 * OpenAI's usage object as the neutral Usage; null when it is not an object or lacks either count,
 * or has one that is negative (the gateway estimates instead, as for Anthropic's usage: a missing
 * completion count read as zero settled a delivered answer for its prompt alone). Cached reads are `prompt_tokens_details.cached_tokens`,
 * unless the provider reports them in Anthropic's names: then those are the reads (also copied
 * into `cached_tokens` for OpenAI clients, so never counted twice) and `cache_creation_input_tokens`
 * the writes; otherwise the writes are `prompt_tokens_details.cache_write_tokens` (OpenRouter).
 * Reasoning and cached tokens are parts of the totals, never added.
 */
export function readUsage(u: unknown): Usage | null {
  const o = openAIUsageFields(u);
  if (!o) return null;
  if (!usable(o.prompt_tokens) || !usable(o.completion_tokens)) return null;
  const anthropicNames = o.cache_creation_input_tokens !== undefined || o.cache_read_input_tokens !== undefined;
  return {
    input: {
      total: count(o.prompt_tokens),
      cacheRead: count(anthropicNames ? o.cache_read_input_tokens : o.prompt_tokens_details?.cached_tokens),
      // A router in front of Claude (OpenRouter) reports the writes in OpenAI's details, beside the reads.
      cacheWrite: count(anthropicNames ? o.cache_creation_input_tokens : o.prompt_tokens_details?.cache_write_tokens),
      ...(anthropicNames ? { cacheReadPrice: 'cacheRead' as const } : {}),
    },
    output: outputOf(o.prompt_tokens!, o.completion_tokens!, count(o.completion_tokens_details?.reasoning_tokens), o.total_tokens),
    estimated: false,
  };
}

/**
 * The output as billed. OpenAI counts reasoning inside `completion_tokens` (total = prompt +
 * completion). xAI reports it beside them: `completion_tokens` is the visible text and the total is
 * prompt + completion + reasoning, every part of it billed as output. The total tells the two apart,
 * so the reasoning is added only when the provider's own total says it is outside the completion.
 */
function outputOf(prompt: number, completion: number, reasoning: number, total: number | undefined): Usage['output'] {
  const beside = reasoning > 0 && total !== undefined && total !== prompt + completion && total === prompt + completion + reasoning;
  return { total: count(beside ? completion + reasoning : completion), reasoning };
}
