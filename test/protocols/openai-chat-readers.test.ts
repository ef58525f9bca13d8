import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { z } from 'zod';
import { readUsage } from '../../src/protocols/openai-chat/decode-usage.ts';
import { isOpenAICompletion, openAIUsageFields } from '../../src/protocols/openai-chat/schemas.ts';

/*
 * The readers of a provider's answer are written by hand for speed; these schemas state their rules
 * declaratively (a count that is not a number reads as absent, a details object that is not an
 * object reads as absent, null stays null), and the readers must agree with them on any value.
 */
const count = z.number().optional().catch(undefined);
const details = <T extends z.ZodRawShape>(shape: T) => z.looseObject(shape).nullish().catch(undefined);
const usageRule = z.looseObject({
  prompt_tokens: count,
  completion_tokens: count,
  prompt_tokens_details: details({ cached_tokens: count }),
  completion_tokens_details: details({ reasoning_tokens: count }),
  cache_creation_input_tokens: count,
  cache_read_input_tokens: count,
});
const completionRule = z.looseObject({ choices: z.array(z.unknown()) });

const READ = ['prompt_tokens', 'completion_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const;

/** What the bill reads of a usage: the counts and the two details' counts. */
function billedFields(o: Record<string, any> | undefined) {
  if (!o) return undefined;
  return {
    ...Object.fromEntries(READ.map((k) => [k, o[k]])),
    cached: o.prompt_tokens_details === null ? null : o.prompt_tokens_details?.cached_tokens,
    cachedAbsent: o.prompt_tokens_details === undefined,
    reasoning: o.completion_tokens_details === null ? null : o.completion_tokens_details?.reasoning_tokens,
    reasoningAbsent: o.completion_tokens_details === undefined,
  };
}

/** Odd values a provider might send where a count or a details object belongs. */
const oddValue = fc.oneof(
  fc.integer({ min: -5, max: 1_000_000 }),
  fc.double(),
  fc.constantFrom(null, undefined, NaN, Infinity, -Infinity, '12', true, [], [3], {}),
  fc.record({ cached_tokens: fc.oneof(fc.integer(), fc.string(), fc.constant(null)), reasoning_tokens: fc.oneof(fc.integer(), fc.constant('x')) }),
);
const usageLike = fc.oneof(
  fc.dictionary(fc.constantFrom(...READ, 'prompt_tokens_details', 'completion_tokens_details', 'total_tokens', 'cost'), oddValue),
  oddValue,
  fc.anything(),
);

describe('the OpenAI answer readers agree with their rules', () => {
  test('a usage object: every count and detail read as the rule reads it, on any value', () => {
    fc.assert(
      fc.property(usageLike, (u) => {
        const rule = usageRule.safeParse(u);
        assert.deepEqual(billedFields(openAIUsageFields(u)), billedFields(rule.success ? rule.data : undefined));
      }),
      { numRuns: 3000 },
    );
  });

  test('readUsage on odd usage objects: counts that are not numbers are absent, details of the wrong type are ignored', () => {
    assert.equal(readUsage([1, 2]), null);
    assert.equal(readUsage({ prompt_tokens: '12' }), null);
    assert.deepEqual(readUsage({ prompt_tokens: 10, completion_tokens: 2.7, prompt_tokens_details: [4], completion_tokens_details: null }), {
      input: { total: 10, cacheRead: 0, cacheWrite: 0 },
      output: { total: 2, reasoning: 0 },
      estimated: false,
    });
  });

  test('a chat completion: an object with an array of choices, on any value', () => {
    const completion = fc.oneof(fc.anything(), fc.record({ choices: fc.anything() }), fc.array(fc.record({ choices: fc.array(fc.anything()) })));
    fc.assert(
      fc.property(completion, (raw) => assert.equal(isOpenAICompletion(raw), completionRule.safeParse(raw).success)),
      { numRuns: 3000 },
    );
  });
});
