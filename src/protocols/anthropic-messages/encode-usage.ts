import type { Usage } from '../internal.ts';

/**
 * The billed usage in Anthropic's terms: `input_tokens` leaves out cache writes and reads, which
 * are reported apart (an OpenAI provider's cached reads are Anthropic's cache reads).
 */
export function anthropicUsage(u: Usage) {
  const cacheRead = u.cachedTokens;
  return {
    input_tokens: Math.max(0, u.promptTokens - (u.cacheWriteTokens ?? 0) - cacheRead),
    cache_creation_input_tokens: u.cacheWriteTokens ?? 0,
    cache_read_input_tokens: cacheRead,
    output_tokens: u.completionTokens,
  };
}

/** OpenAI's finish_reason as Anthropic's stop_reason. */
export function stopReason(finish: unknown): string {
  switch (finish) {
    case 'length': return 'max_tokens';
    case 'tool_calls': case 'function_call': return 'tool_use';
    case 'content_filter': return 'refusal';
    default: return 'end_turn';
  }
}
