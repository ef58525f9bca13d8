import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';

/*
 * Odd inputs and counts on the Messages API: a text field that is not a string (String() of
 * {"toString": 1} throws) is a 400 naming the field on every path that reads it, and every block
 * type the Messages API accepts is counted, by count_tokens and by the usage estimate of a native
 * request whose provider reported no usage (Claude Code compacts by the first; the second is billed).
 */

/** A Claude model with a window large enough for the 100,000-word blocks below. */
const BIG = { ...CLAUDE, name: 'claude-big', contextLength: 1_000_000 };
const NATIVE = 'anth/claude-big';
const TRANSLATED = 'fake/chat-small';
const WORDS = ['river', 'stone', 'window', 'garden', 'silver', 'market', 'cloud', 'pencil', 'harbor', 'lantern', 'meadow', 'copper'];
/** 100,000 ordinary words: about 100,000 o200k tokens. */
const LONG = Array.from({ length: 100_000 }, (_, i) => WORDS[(i * 7 + (i >> 3)) % WORDS.length]).join(' ');
const TOKENS_AT_LEAST = 50_000;
const BAD = { toString: 1 };

async function post(url: string, key: string, body: unknown, path = '/v1/messages') {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': key }, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, text, json: () => JSON.parse(text) };
}

const search = (text: string) => ({ type: 'search_result', source: 'https://example.com/a', title: 'A', content: [{ type: 'text', text }] });
const asked = { role: 'user', content: 'go on' };
const toolUse = { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: {} }] };

/** Each block type the Messages API accepts, holding LONG where it carries text, as a conversation. */
const BLOCKS: Record<string, { messages: unknown[]; system?: unknown; nativeChat: boolean }> = {
  text: { messages: [{ role: 'user', content: [{ type: 'text', text: LONG }] }], nativeChat: true },
  'system text block': { system: [{ type: 'text', text: LONG }], messages: [asked], nativeChat: true },
  search_result: { messages: [{ role: 'user', content: [search(LONG), { type: 'text', text: 'summarise' }] }], nativeChat: true },
  'tool_result holding a search_result': {
    messages: [asked, toolUse, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [search(LONG)] }] }],
    nativeChat: true,
  },
  'tool_result holding text': {
    messages: [asked, toolUse, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: LONG }] }],
    nativeChat: true,
  },
  thinking: {
    messages: [
      asked,
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: LONG, signature: 'sig' },
          { type: 'text', text: 'ok' },
        ],
      },
      asked,
    ],
    nativeChat: true,
  },
  redacted_thinking: {
    messages: [
      asked,
      {
        role: 'assistant',
        content: [
          { type: 'redacted_thinking', data: LONG },
          { type: 'text', text: 'ok' },
        ],
      },
      asked,
    ],
    nativeChat: true,
  },
  'tool_use input': {
    messages: [
      asked,
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: LONG } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'none' }] },
    ],
    nativeChat: true,
  },
  'document, text source': {
    messages: [
      {
        role: 'user',
        content: [
          { type: 'document', source: { type: 'text', media_type: 'text/plain', data: LONG } },
          { type: 'text', text: 'summarise' },
        ],
      },
    ],
    nativeChat: true,
  },
  'document, content source': {
    messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'content', content: [{ type: 'text', text: LONG }] } }] }],
    nativeChat: false,
  },
  'document context': {
    messages: [{ role: 'user', content: [{ type: 'document', context: LONG, source: { type: 'text', media_type: 'text/plain', data: 'x' } }] }],
    nativeChat: true,
  },
  'server_tool_use input': {
    messages: [asked, { role: 'assistant', content: [{ type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: LONG } }] }, asked],
    nativeChat: false,
  },
  web_search_tool_result: {
    messages: [
      asked,
      {
        role: 'assistant',
        content: [
          {
            type: 'web_search_tool_result',
            tool_use_id: 'srvtoolu_1',
            content: [{ type: 'web_search_result', url: 'https://e.com', title: 'e', encrypted_content: LONG }],
          },
        ],
      },
      asked,
    ],
    nativeChat: false,
  },
  mcp_tool_result: {
    messages: [asked, { role: 'user', content: [{ type: 'mcp_tool_result', tool_use_id: 'mcptoolu_1', content: [{ type: 'text', text: LONG }] }] }],
    nativeChat: false,
  },
};

describe('attack: count_tokens and the usage estimate count every Messages block type (sqlite)', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE, BIG] });
  });
  beforeEach(() => resetProviders(h));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  for (const [name, c] of Object.entries(BLOCKS)) {
    test(`count_tokens counts a 100,000-word ${name}`, async () => {
      const w = await h.wallet(0);
      const res = await post(h.gw.url, w.key, { model: NATIVE, system: c.system, messages: c.messages }, '/v1/messages/count_tokens');
      assert.equal(res.status, 200, res.text);
      const tokens = res.json().input_tokens;
      assert.ok(tokens > TOKENS_AT_LEAST, `${name}: ${tokens} tokens counted for 100,000 words`);
    });
  }

  for (const [name, c] of Object.entries(BLOCKS).filter(([, c]) => c.nativeChat)) {
    test(`a native request with a 100,000-word ${name} whose provider reports no usage is reserved and billed for it`, async () => {
      const w = await h.wallet(10_000_000);
      h.anthropic.behaviour = { omitUsage: true, content: 'ok' };
      const res = await post(h.gw.url, w.key, { model: NATIVE, max_tokens: 10, system: c.system, messages: c.messages });
      assert.equal(res.status, 200, res.text);
      const charged = 10_000_000 - (await h.balance(w.account)).balance_usdc;
      // 1 micro-USDC a prompt token with a 20% markup: the estimate reads every block the provider was sent.
      assert.ok(charged > TOKENS_AT_LEAST * 1.2, `${name}: charged ${charged} micro-USDC for 100,000 words`);
    });
  }
});

describe('attack: a non-string where the Messages API takes text is a 400 naming the field, never a 500 (sqlite)', () => {
  let h: AnthropicHarness;
  let key: string;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE, BIG] });
    key = (await h.wallet(1_000_000)).key;
  });
  beforeEach(() => resetProviders(h));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  const cases: [string, Record<string, unknown>, string][] = [
    ['a text block', { messages: [{ role: 'user', content: [{ type: 'text', text: BAD }] }] }, 'messages[0].content[0].text'],
    ['a system block', { system: [{ type: 'text', text: BAD }], messages: [asked] }, 'system[0].text'],
    [
      'a thinking block',
      { messages: [asked, { role: 'assistant', content: [{ type: 'thinking', thinking: BAD, signature: 's' }] }, asked] },
      'messages[1].content[0].thinking',
    ],
    ['an assistant text block', { messages: [asked, { role: 'assistant', content: [{ type: 'text', text: BAD }] }, asked] }, 'messages[1].content[0].text'],
    [
      'redacted_thinking data',
      { messages: [asked, { role: 'assistant', content: [{ type: 'redacted_thinking', data: BAD }] }, asked] },
      'messages[1].content[0].data',
    ],
    [
      'a tool_use name',
      { messages: [asked, { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: BAD, input: {} }] }, asked] },
      'messages[1].content[0].name',
    ],
    [
      'an image source',
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: BAD } }] }] },
      'messages[0].content[0].source.data',
    ],
    [
      'a text document source',
      { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: BAD } }] }] },
      'messages[0].content[0].source.data',
    ],
    ['a search_result source', { messages: [{ role: 'user', content: [{ ...search('x'), source: BAD }] }] }, 'messages[0].content[0].source'],
    [
      'a tool_result text block',
      { messages: [asked, toolUse, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: BAD }] }] }] },
      'messages[2].content[0].content[0].text',
    ],
  ];

  for (const [name, shape, field] of cases) {
    test(`{"toString": 1} as ${name}: 400 naming ${field} on the native path, the translated path and count_tokens`, async () => {
      for (const [model, path] of [
        [NATIVE, '/v1/messages'],
        [TRANSLATED, '/v1/messages'],
        [NATIVE, '/v1/messages/count_tokens'],
      ] as const) {
        const res = await post(h.gw.url, key, { model, max_tokens: 10, ...shape }, path);
        assert.equal(res.status, 400, `${model} ${path}: ${res.text}`);
        const error = res.json().error;
        assert.equal(error.code, 'VALIDATION_ERROR');
        assert.equal(error.param, field, res.text);
        assert.ok(error.message.includes(field), res.text);
      }
      assert.equal(h.anthropic.received.length + h.fake.received.length, 0, 'nothing reached a provider');
    });
  }

  test('{"toString": 1} in the Responses include list is a 400 naming include', async () => {
    const res = await fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: TRANSLATED, input: 'hi', include: [BAD] }),
    });
    const body = await res.json();
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(body.error.param ?? body.param, 'include', JSON.stringify(body));
  });

  test('{"toString": 1} as a chat tool call\'s name is answered and billed by estimate when the provider reports no usage', async () => {
    const w = await h.wallet(1_000_000);
    h.fake.behaviour = { omitUsage: true, content: 'done' };
    const messages = [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: BAD, arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'ok' },
    ];
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
      body: JSON.stringify({ model: TRANSLATED, messages }),
    });
    const body = await res.json();
    assert.notEqual(res.status, 500, JSON.stringify(body));
    if (res.status === 200) assert.ok(body.usage.prompt_tokens > 0);
  });
});
