import type { Usage } from '../internal.ts';

/**
 * The billed usage in Anthropic's terms: `input_tokens` leaves out cache writes and reads, which
 * are reported apart (an OpenAI provider's cached reads are Anthropic's cache reads).
 */
export function anthropicUsage(u: Usage) {
  const { total, cacheRead, cacheWrite } = u.input;
  return {
    input_tokens: Math.max(0, total - cacheWrite - cacheRead),
    cache_creation_input_tokens: cacheWrite,
    cache_read_input_tokens: cacheRead,
    output_tokens: u.output.total,
  };
}

/** OpenAI's finish_reason as Anthropic's stop_reason. */
export function stopReason(finish: unknown): string {
  switch (finish) {
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
    case 'function_call':
      return 'tool_use';
    case 'content_filter':
      return 'refusal';
    default:
      return 'end_turn';
  }
}
