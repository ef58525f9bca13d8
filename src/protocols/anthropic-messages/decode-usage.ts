import type { Usage } from '../internal.ts';
import { anthropicUsageSchema } from './schemas.ts';
import type { AnthropicUsage } from './types.ts';

/**
 * Usage in the internal (OpenAI) form. Anthropic's `input_tokens` leaves out both cache terms,
 * while OpenAI's `prompt_tokens` includes cached reads, so the prompt is the sum of all three. The
 * two cache terms stay apart as well because each has its own price (cache writes cost more than
 * input, cache reads less).
 */
export interface TranslatedUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0);

export function translateUsage(u: AnthropicUsage): TranslatedUsage {
  const creation = count(u.cache_creation_input_tokens);
  const read = count(u.cache_read_input_tokens);
  const prompt = count(u.input_tokens) + creation + read;
  const completion = count(u.output_tokens);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: read },
    cache_creation_input_tokens: creation,
    cache_read_input_tokens: read,
  };
}

/**
 * The usage to bill, or null when the provider left out either side: a missing count read as
 * zero would settle a delivered answer for nothing, so the gateway estimates instead.
 */
export function reportedUsage(u: AnthropicUsage | undefined): TranslatedUsage | null {
  const checked = anthropicUsageSchema.safeParse(u);
  return checked.success ? translateUsage(checked.data) : null;
}

const whole = (v: number): number => Math.floor(v);

/**
 * The usage the Anthropic decoders report, in neutral terms: the prompt is the sum of the three
 * input terms (as translateUsage adds them up), the reads and the writes each apart, counted in
 * whole tokens. Anthropic reports no reasoning count apart from the output.
 */
export function neutralUsage(t: TranslatedUsage): Usage {
  return {
    input: {
      total: whole(t.prompt_tokens),
      cacheRead: whole(t.cache_read_input_tokens),
      cacheWrite: whole(t.cache_creation_input_tokens),
      cacheReadPrice: 'cacheRead',
    },
    output: { total: whole(t.completion_tokens), reasoning: 0 },
    estimated: false,
  };
}
