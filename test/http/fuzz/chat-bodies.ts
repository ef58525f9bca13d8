import fc from 'fast-check';
import { junk, junkJson, objectJson, otherBodyText, PROTOTYPE_KEYS, trickyString, value, writeJson, type Json } from './values.ts';

/**
 * Chat-completions bodies: a valid request with its fields mutated one or several at a time, so
 * most of them get past the first check and reach the deep ones (content parts, tools, the
 * reservation bound, the provider and the bill), and some that are not chat requests at all.
 */
const or = (good: fc.Arbitrary<unknown>, goodWeight = 4): fc.Arbitrary<Json> =>
  fc.oneof({ weight: goodWeight, arbitrary: good.map(value) }, { weight: 1, arbitrary: junkJson });

const MODELS = ['chat-small', 'fake/chat-small', 'fake/shared-name', 'thinker', 'effort', 'other/shared-name'];
const WRONG_MODELS = ['shared-name', 'nope', 'fake/', '/chat-small', 'FAKE/CHAT-SMALL', 'fake/chat-small ', '__proto__', 'constructor'];

const text = fc.oneof({ weight: 4, arbitrary: fc.string({ maxLength: 30 }) }, { weight: 1, arbitrary: trickyString });
const schema = fc.oneof(fc.constant({ type: 'object', properties: { a: { type: 'string' } } }), fc.jsonValue({ maxDepth: 4 }));

const PART_TYPES = ['text', 'refusal', 'image_url', 'input_audio', 'file', 'video', 'TEXT', ...PROTOTYPE_KEYS];
const part = fc.oneof(
  { weight: 4, arbitrary: fc.record({ type: fc.constant('text'), text }) },
  {
    weight: 3,
    arbitrary: fc.record(
      {
        type: fc.oneof(fc.constantFrom(...PART_TYPES), junk),
        text: fc.oneof(text, junk),
        image_url: fc.oneof(
          fc.record({
            url: fc.constantFrom('https://example.com/a.png', 'data:image/png;base64,AAAA', ''),
            detail: fc.constantFrom('low', 'high', 'auto', 'x'),
          }),
          junk,
        ),
        input_audio: fc.oneof(fc.record({ data: fc.base64String({ maxLength: 40 }), format: fc.constantFrom('wav', 'mp3') }), junk),
        file: fc.oneof(fc.record({ file_data: fc.base64String({ maxLength: 40 }), filename: text }), junk),
        refusal: text,
      },
      { requiredKeys: ['type'] },
    ),
  },
  { weight: 1, arbitrary: junk },
);

const message = fc.oneof(
  { weight: 12, arbitrary: fc.record({ role: fc.constant('user'), content: text }) },
  {
    weight: 4,
    arbitrary: fc.record(
      {
        role: fc.oneof(
          { weight: 6, arbitrary: fc.constantFrom('user', 'system', 'assistant', 'tool', 'developer', 'function', ...PROTOTYPE_KEYS) },
          { weight: 1, arbitrary: junk },
        ),
        content: fc.oneof(text, fc.constant(null), fc.array(part, { maxLength: 4 }), junk),
        name: fc.oneof(text, junk),
        tool_call_id: fc.oneof(text, junk),
        tool_calls: fc.oneof(
          fc.array(fc.record({ id: text, type: fc.constant('function'), function: fc.record({ name: text, arguments: text }) }), { maxLength: 2 }),
          junk,
        ),
      },
      { requiredKeys: ['role'] },
    ),
  },
  { weight: 1, arbitrary: junk },
);

const tool = fc.oneof(
  fc.record({ type: fc.constant('function'), function: fc.record({ name: text, description: text, parameters: schema }, { requiredKeys: ['name'] }) }),
  junk,
);

const chatFields: Record<string, fc.Arbitrary<Json>> = {
  model: or(fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...MODELS) }, { weight: 1, arbitrary: fc.constantFrom(...WRONG_MODELS) }), 12),
  messages: or(fc.array(message, { minLength: 1, maxLength: 4 }), 12),
  stream: or(fc.boolean()),
  stream_options: or(fc.record({ include_usage: fc.oneof(fc.boolean(), junk) }, { requiredKeys: [] })),
  n: or(fc.integer({ min: 1, max: 3 })),
  max_tokens: or(fc.oneof(fc.integer({ min: 1, max: 5000 }), fc.constantFrom(0, -1, 4096, 4097, 1e9))),
  max_completion_tokens: or(fc.integer({ min: 1, max: 5000 }), 1),
  temperature: or(fc.double({ min: 0, max: 2, noNaN: true })),
  top_p: or(fc.double({ min: 0, max: 1, noNaN: true }), 1),
  stop: or(fc.oneof(text, fc.array(text, { maxLength: 4 })), 1),
  logit_bias: or(fc.dictionary(fc.string({ maxLength: 6 }), fc.integer({ min: -100, max: 100 }), { maxKeys: 3 }), 1),
  seed: or(fc.integer(), 1),
  user: or(text, 1),
  metadata: or(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }), 1),
  tools: or(fc.array(tool, { maxLength: 3 }), 2),
  tool_choice: or(fc.oneof(fc.constantFrom('auto', 'none', 'required'), fc.record({ type: fc.constant('function'), function: fc.record({ name: text }) })), 1),
  parallel_tool_calls: or(fc.boolean(), 1),
  functions: or(fc.array(fc.record({ name: text, parameters: schema }), { maxLength: 2 }), 1),
  function_call: or(fc.oneof(fc.constantFrom('auto', 'none'), fc.record({ name: text })), 1),
  response_format: or(
    fc.oneof(
      fc.constant({ type: 'text' }),
      fc.constant({ type: 'json_object' }),
      fc.record({ type: fc.constant('json_schema'), json_schema: fc.record({ name: text, schema, strict: fc.boolean() }) }),
    ),
    2,
  ),
  service_tier: or(fc.constantFrom('auto', 'default', 'priority', 'flex'), 1),
  modalities: or(fc.constantFrom(['text'], ['text', 'audio'], []), 1),
  store: or(fc.boolean(), 1),
  reasoning_effort: or(fc.constantFrom('minimal', 'low', 'medium', 'high', 'max'), 1),
  thinking: or(fc.record({ type: fc.constantFrom('enabled', 'disabled'), budget_tokens: fc.integer({ min: -1, max: 20000 }) }), 1),
  audio: or(fc.record({ voice: text, format: text }), 1),
  best_of: or(fc.integer({ min: 1, max: 3 }), 1),
  prediction: or(fc.record({ type: fc.constant('content'), content: text }), 1),
  web_search_options: or(fc.constant({}), 1),
};

/** A chat body as it goes on the wire. */
export const chatBodyText: fc.Arbitrary<string> = fc.oneof(
  { weight: 12, arbitrary: objectJson(chatFields, { presentPercent: 8 }).map(writeJson) },
  { weight: 1, arbitrary: otherBodyText },
);
