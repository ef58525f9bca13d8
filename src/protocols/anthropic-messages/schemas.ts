import { z } from 'zod';

/*
 * What the gateway reads of an Anthropic provider's answers, as schemas in place of casts. They
 * check what decides the outcome (an answer is a message; a usage holds both counts the bill needs)
 * and keep today's leniency elsewhere: a content block or stream event with fields missing is
 * translated with defaults, as before. Validation runs on the answer and on usage objects (a few
 * per stream), never on content deltas, which stay on the translator's cheap path.
 */

/** A count Anthropic may leave out or send as null (the cache terms); any other value reads as absent. */
const optionalCount = z.number().nullish().catch(undefined);

/**
 * A usage object the bill can use: both sides counted, neither negative. One without them is not
 * refused: the caller estimates instead (reading a missing or negative count as zero would settle a
 * delivered answer for nothing).
 */
export const anthropicUsageSchema = z.looseObject({
  input_tokens: z.number().nonnegative(),
  output_tokens: z.number().nonnegative(),
  cache_creation_input_tokens: optionalCount,
  cache_read_input_tokens: optionalCount,
});

/** A Messages API answer as far as it decides success: a `message` whose content is a list of blocks. */
export const anthropicMessageSchema = z.looseObject({
  type: z.literal('message'),
  content: z.array(z.unknown()),
});
