import { z } from 'zod';

/*
 * What the gateway reads of an OpenAI-compatible provider's answer, as schemas in place of casts.
 * They check only what is read (the answer is otherwise passed on byte for byte) and keep the
 * leniency the bill relies on: a count that is not a number reads as absent, never as a failure,
 * so a provider's odd usage object is estimated or counted as zero exactly as before, not refused.
 * Validation runs once per answer and once per usage chunk, never on content deltas.
 */

/** A count the provider may have sent: a number, or absent (any other value reads as absent). */
const count = z.number().optional().catch(undefined);

/** The `details` objects of OpenAI's usage; anything else in their place reads as absent. */
const details = <T extends z.ZodRawShape>(shape: T) => z.looseObject(shape).nullish().catch(undefined);

/**
 * OpenAI's usage object, with the cache fields in Anthropic's names that some OpenAI-compatible
 * providers (proxies in front of Claude) report, and that the Anthropic translator's internal
 * form carries too.
 */
export const openAIUsageSchema = z.looseObject({
  prompt_tokens: count,
  completion_tokens: count,
  prompt_tokens_details: details({ cached_tokens: count }),
  completion_tokens_details: details({ reasoning_tokens: count }),
  cache_creation_input_tokens: count,
  cache_read_input_tokens: count,
});

/** A chat.completion as far as the gateway relies on it: its `choices` are an array. */
export const openAICompletionSchema = z.looseObject({ choices: z.array(z.unknown()) });
