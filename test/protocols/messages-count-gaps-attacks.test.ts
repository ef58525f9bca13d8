import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CLAUDE, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';

/*
 * Fields the block readers (src/protocols/anthropic-messages/countable-blocks.ts) reach other than
 * a block's main text, each holding 100,000 words: count_tokens must count them (Claude Code
 * compacts by this count; the usage estimate of a native request reads the same text).
 */
const BIG = { ...CLAUDE, name: 'claude-big', contextLength: 1_000_000 };
const NATIVE = 'anth/claude-big';
const WORDS = ['river', 'stone', 'window', 'garden', 'silver', 'market', 'cloud', 'pencil', 'harbor', 'lantern', 'meadow', 'copper'];
const LONG = Array.from({ length: 100_000 }, (_, i) => WORDS[(i * 7 + (i >> 3)) % WORDS.length]).join(' ');
const TOKENS_AT_LEAST = 50_000;
const asked = { role: 'user', content: 'go on' };
const toolUse = { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: {} }] };
const tool = (extra: Record<string, unknown>) => ({ name: 'lookup', input_schema: { type: 'object', properties: {} }, ...extra });

const SHAPES: Record<string, Record<string, unknown>> = {
  "a text block's citations": {
    messages: [
      asked,
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'ok', citations: [{ type: 'char_location', cited_text: LONG, document_index: 0, start_char_index: 0, end_char_index: 1 }] },
        ],
      },
      asked,
    ],
  },
  "a cache_control'd system block": { system: [{ type: 'text', text: LONG, cache_control: { type: 'ephemeral' } }], messages: [asked] },
  "a tool's description": { tools: [tool({ description: LONG })], messages: [asked] },
  "a tool's input_schema": { tools: [tool({ input_schema: { type: 'object', properties: { q: { type: 'string', description: LONG } } } })], messages: [asked] },
  "a document's title": {
    messages: [{ role: 'user', content: [{ type: 'document', title: LONG, source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }],
  },
  "a search_result's title": {
    messages: [{ role: 'user', content: [{ type: 'search_result', source: 's', title: LONG, content: [{ type: 'text', text: 'x' }] }] }],
  },
  'a text document inside a tool_result': {
    messages: [
      asked,
      toolUse,
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: LONG } }] },
        ],
      },
    ],
  },
  "a tool_result nested past the readers' depth": {
    messages: [
      asked,
      toolUse,
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'toolu_1',
            content: [
              {
                type: 'search_result',
                source: 's',
                content: [
                  { type: 'document', source: { type: 'content', content: [{ type: 'search_result', source: 's', content: [{ type: 'text', text: LONG }] }] } },
                ],
              },
            ],
          },
        ],
      },
    ],
  },
  'a block of a type the gateway has no reader for': { messages: [{ role: 'user', content: [{ type: 'container_upload', file_id: LONG }] }] },
};

describe("attack: count_tokens counts the text outside a block's main field (sqlite)", () => {
  let h: AnthropicHarness;
  let key: string;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE, BIG] });
    key = (await h.wallet(0)).key;
  });
  after(() => h.stop());

  for (const [name, shape] of Object.entries(SHAPES)) {
    test(`100,000 words in ${name} are counted`, async () => {
      const res = await fetch(`${h.gw.url}/v1/messages/count_tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify({ model: NATIVE, ...shape }),
      });
      const text = await res.text();
      assert.equal(res.status, 200, text);
      const tokens = JSON.parse(text).input_tokens;
      assert.ok(tokens > TOKENS_AT_LEAST, `${name}: ${tokens} tokens counted for 100,000 words`);
    });
  }

  test('an unknown top-level field is a 400 naming it, as on /v1/messages; the Messages fields are taken', async () => {
    const count = (body: Record<string, unknown>) =>
      fetch(`${h.gw.url}/v1/messages/count_tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify(body),
      });
    const refused = await count({ model: NATIVE, messages: [asked], numbers: [1, 2, 3] });
    const text = await refused.text();
    assert.equal(refused.status, 400, text);
    assert.equal(JSON.parse(text).error.type, 'invalid_request_error');
    assert.match(text, /Unrecognized request argument supplied: numbers/);
    const known = await count({
      model: NATIVE,
      messages: [asked],
      system: 'be brief',
      tools: [tool({})],
      tool_choice: { type: 'auto' },
      thinking: { type: 'enabled', budget_tokens: 1024 },
    });
    assert.equal(known.status, 200, await known.text());
  });
});
