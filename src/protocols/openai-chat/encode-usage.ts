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

/**
 * The usage an answer shows beside its charge: the provider's own, unless the bill was estimated
 * (the provider's figures were what could not be billed from): then the billed usage.
 */
export function shownUsage<T>(provider: T, billed: Usage | undefined): T | ReturnType<typeof openAIUsageOf> {
  return billed?.estimated ? openAIUsageOf(billed) : provider;
}
