import type { Usage } from '../internal.ts';

/**
 * The billed (neutral) usage in OpenAI's names, for an answer whose provider reported none (the
 * gateway estimated it): the charge then still has a usage object to ride on.
 */
export function openAIUsageOf(u: Usage) {
  return {
    prompt_tokens: u.input.total,
    completion_tokens: u.output.total,
    total_tokens: u.input.total + u.output.total,
    prompt_tokens_details: { cached_tokens: u.input.cacheRead },
    completion_tokens_details: { reasoning_tokens: u.output.reasoning },
  };
}
