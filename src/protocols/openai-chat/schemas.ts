/*
 * What the gateway reads of an OpenAI-compatible provider's answer, checked in place of casts. They
 * check only what is read (the answer is otherwise passed on byte for byte) and keep the leniency the
 * bill relies on: a count that is not a number reads as absent, never as a failure, so a provider's
 * odd usage object is estimated or counted as zero, not refused. Written by hand rather than as zod
 * schemas: they run on every answer, and a schema's parse builds a copy of the object it checks
 * (test/protocols/openai-chat-readers.test.ts holds them to the rules above).
 */

/** A JSON object: not null, not an array. */
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A count the provider may have sent: a finite number, else absent. */
const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** One of the `details` objects of OpenAI's usage: null as null, an object's count read, anything else absent. */
function details(v: unknown, ...fields: string[]): { [field: string]: number | undefined } | null | undefined {
  if (v === null) return null;
  return isObject(v) ? Object.fromEntries(fields.map((field) => [field, count(v[field])])) : undefined;
}

/**
 * OpenAI's usage object as far as the bill reads it, with the cache fields in Anthropic's names
 * that some OpenAI-compatible providers (proxies in front of Claude) report, and that the
 * Anthropic translator's internal form carries too. Undefined when `u` is not an object.
 */
export interface OpenAIUsageFields {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** `cache_write_tokens`: the writes an OpenAI-compatible router in front of Claude reports beside the reads (OpenRouter). */
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
  total_tokens?: number;
}

export function openAIUsageFields(u: unknown): OpenAIUsageFields | undefined {
  if (!isObject(u)) return undefined;
  return {
    prompt_tokens: count(u.prompt_tokens),
    completion_tokens: count(u.completion_tokens),
    prompt_tokens_details: details(u.prompt_tokens_details, 'cached_tokens', 'cache_write_tokens'),
    completion_tokens_details: details(u.completion_tokens_details, 'reasoning_tokens'),
    cache_creation_input_tokens: count(u.cache_creation_input_tokens),
    cache_read_input_tokens: count(u.cache_read_input_tokens),
    total_tokens: count(u.total_tokens),
  };
}

/** A chat.completion as far as the gateway relies on it: an object whose `choices` are an array. */
export const isOpenAICompletion = (raw: unknown): boolean => isObject(raw) && Array.isArray(raw.choices);
