import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { responsesInbound } from '../../src/protocols/openai-responses/inbound.ts';
import { planChat } from '../../src/metered/plan/plan.ts';
import { parseConfig } from '../../src/config/load.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { ApiError } from '../../src/refusal.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';

/**
 * A key holder (or a payer) shapes a Responses request so that something the provider bills
 * escapes the reservation: text in a field the translation forgets to count, an output limit the
 * provider does not see, a built-in tool billed per call, or state kept on the provider's side
 * that expands into an unbounded prompt. Each is either counted or refused before anything is
 * reserved or sent.
 */

const config = parseConfig(
  {
    providers: { p: { baseUrl: 'http://127.0.0.1:9' } },
    models: [{ provider: 'p', name: 'm', contextLength: 1_000_000, maxOutputTokens: 4096, promptCostPer1M: '1', completionCostPer1M: '2' }],
  },
  {},
);
/** A provider of type anthropic: the same Responses body, translated twice (Responses → chat → Messages). */
const anthConfig = parseConfig(
  {
    providers: { a: { type: 'anthropic' } },
    models: [{ provider: 'a', name: 'claude', contextLength: 1_000_000, maxOutputTokens: 4096, promptCostPer1M: '1', completionCostPer1M: '2' }],
  },
  {},
);

const plan = (body: Record<string, unknown>, cfg = config) =>
  planChat(responsesInbound.decodeRequest({ model: cfg === config ? 'p/m' : 'a/claude', ...body }), buildCatalog(cfg), cfg);

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ApiError, String(err));
    return err;
  }
  assert.fail('the request was accepted');
}

const BIG = 'z'.repeat(50_000);
const weather = { type: 'function', name: 'weather', parameters: { type: 'object', properties: {} } };

/** Each place a Responses request can carry prompt text, filled with BIG. */
const CARRIERS: Record<string, Record<string, unknown>> = {
  instructions: { instructions: BIG, input: 'hi' },
  'a tool description': { input: 'hi', tools: [{ ...weather, description: BIG }] },
  'a tool schema': { input: 'hi', tools: [{ ...weather, parameters: { type: 'object', description: BIG } }] },
  'a user input_text part': { input: [{ role: 'user', content: [{ type: 'input_text', text: BIG }] }] },
  'a developer message': {
    input: [
      { role: 'developer', content: BIG },
      { role: 'user', content: 'hi' },
    ],
  },
  'an assistant message': {
    input: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: [{ type: 'output_text', text: BIG }] },
      { role: 'user', content: 'and?' },
    ],
  },
  'function_call arguments': {
    input: [
      { role: 'user', content: 'hi' },
      { type: 'function_call', call_id: 'c1', name: 'weather', arguments: JSON.stringify({ note: BIG }) },
      { type: 'function_call_output', call_id: 'c1', output: 'ok' },
    ],
    tools: [weather],
  },
  'a function_call_output': {
    input: [
      { role: 'user', content: 'hi' },
      { type: 'function_call', call_id: 'c1', name: 'weather', arguments: '{}' },
      { type: 'function_call_output', call_id: 'c1', output: BIG },
    ],
    tools: [weather],
  },
  'a text.format schema': { input: 'hi', text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object', description: BIG } } } },
};

describe('the prompt bound counts every part of a Responses request', () => {
  for (const [where, body] of Object.entries(CARRIERS)) {
    for (const [upstream, cfg] of [
      ['OpenAI-compatible', config],
      ['Anthropic', anthConfig],
    ] as const) {
      // Anthropic has no JSON-schema output: that request is a 400 (anthropic-upstream.test.ts), not a bound question.
      if (upstream === 'Anthropic' && where === 'a text.format schema') continue;
      test(`${where} (${upstream} upstream): sent, and counted in the reservation`, () => {
        const p = plan(body, cfg);
        assert.ok(p.upstreamBytes.toString().includes(BIG), 'the text reaches the provider');
        assert.ok(p.promptUpperBound >= BIG.length, `bound ${p.promptUpperBound} covers the ${BIG.length} bytes`);
        // 1 micro-USDC a prompt token: the reservation holds at least the text's price.
        assert.ok(p.reservationUsdc >= BIG.length, `reservation ${p.reservationUsdc}`);
      });
    }
  }
});

describe('max_output_tokens bounds the output', () => {
  test("it is sent as the provider's limit and reserved at the completion price", () => {
    const small = plan({ input: 'hi', max_output_tokens: 10 });
    const large = plan({ input: 'hi', max_output_tokens: 4000 });
    assert.equal(JSON.parse(small.upstreamBytes.toString()).max_tokens, 10);
    assert.equal(large.maxTokens, 4000);
    // 2 micro-USDC a completion token before the markup, which only adds.
    assert.ok(large.reservationUsdc - small.reservationUsdc >= 3990 * 2, `${large.reservationUsdc} - ${small.reservationUsdc}`);
  });

  test('left out, the configured default still goes upstream: the output is never unbounded', () => {
    const p = plan({ input: 'hi' });
    assert.equal(JSON.parse(p.upstreamBytes.toString()).max_tokens, config.chat.defaultMaxTokens);
  });

  test("above the model's limit, or not a positive whole number: 400", () => {
    assert.match(refusal(() => plan({ input: 'hi', max_output_tokens: 5000 })).message, /above p\/m's limit of 4096/);
    assert.equal(refusal(() => plan({ input: 'hi', max_output_tokens: 0 })).extra.param, 'max_output_tokens');
    assert.equal(refusal(() => plan({ input: 'hi', max_output_tokens: 1.5 })).extra.param, 'max_output_tokens');
  });

  for (const field of ['max_tokens', 'max_completion_tokens', 'n', 'messages']) {
    test(`chat's ${field} cannot ride along beside the Responses fields: 400 naming it`, () => {
      const e = refusal(() => plan({ input: 'hi', max_output_tokens: 10, [field]: field === 'messages' ? [{ role: 'user', content: 'x' }] : 4 }));
      assert.equal(e.status, 400);
      assert.equal(e.extra.param, field);
    });
  }
});

/** Billed per call or per session beyond tokens, or expanded from state on the provider's side. */
const REFUSED: Record<string, [Record<string, unknown>, string, RegExp]> = {
  'the file_search tool': [{ tools: [weather, { type: 'file_search', vector_store_ids: ['vs_1'] }] }, 'tools[1]', /built-in file_search tool.*billed per use/],
  'the computer_use_preview tool': [
    { tools: [{ type: 'computer_use_preview', display_width: 1, display_height: 1, environment: 'browser' }] },
    'tools[0]',
    /built-in computer_use_preview tool/,
  ],
  'the code_interpreter tool': [{ tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }, 'tools[0]', /built-in code_interpreter tool/],
  'the image_generation tool': [{ tools: [{ type: 'image_generation' }] }, 'tools[0]', /built-in image_generation tool/],
  'an MCP server': [{ tools: [{ type: 'mcp', server_label: 'x', server_url: 'https://example.com' }] }, 'tools[0]', /built-in mcp tool/],
  'a built-in tool_choice': [{ tools: [weather], tool_choice: { type: 'web_search_preview' } }, 'tool_choice', /built-in tools are not offered/],
  'include[]': [{ include: ['file_search_call.results'] }, 'include', /leave include out/],
  'an include value beside the accepted reasoning.encrypted_content': [
    { include: ['reasoning.encrypted_content', 'web_search_call.action.sources'] },
    'include',
    /web_search_call\.action\.sources.*leave include out/,
  ],
  'include that is not an array': [{ include: 'reasoning.encrypted_content' }, 'include', /array of strings/],
  'client_metadata that is not an object': [{ client_metadata: 'x' }, 'client_metadata', /object/],
  // The decoder sees these only when they were not resolved against a wallet's stored responses (pay-per-request, or responses.store off).
  'an unresolved previous_response_id': [
    { previous_response_id: 'resp_1' },
    'previous_response_id',
    /kept only for requests made with an API key.*send the whole conversation in input/,
  ],
  'a stored conversation': [{ conversation: 'conv_1' }, 'conversation', /keeps no conversations/],
  'a stored prompt template': [{ prompt: { id: 'pmpt_1' } }, 'prompt', /prompt template stored/],
  'background mode': [{ background: true }, 'background', /kept and polled later/],
  'an unresolved item_reference': [
    { input: [{ type: 'item_reference', id: 'msg_1' }] },
    'input[0]',
    /item_reference.*kept only for requests made with an API key.*providerOptions\.openai\.store to false/,
  ],
  'an image stored by file id': [
    { input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file_1' }] }] },
    'input[0].content[0]',
    /stored by id or URL/,
  ],
  'a file fetched from a URL': [
    { input: [{ role: 'user', content: [{ type: 'input_file', file_url: 'https://example.com/huge.pdf' }] }] },
    'input[0].content[0]',
    /stored by id or URL/,
  ],
  'a priced service_tier': [{ service_tier: 'priority' }, 'service_tier', /changes the price per token/],
  "chat's priced web_search_options": [{ web_search_options: {} }, 'web_search_options', /web search, which is billed per call/],
  "chat's audio output": [{ audio: { voice: 'alloy', format: 'mp3' } }, 'audio', /audio prices/],
  'truncation: auto': [{ truncation: 'auto' }, 'truncation', /drop input/],
};

describe('priced features and provider-side state are refused by name', () => {
  for (const [what, [extra, param, message]] of Object.entries(REFUSED)) {
    test(what, () => {
      const e = refusal(() => plan({ input: 'hi', ...extra }));
      assert.equal(e.status, 400);
      assert.equal(e.extra.param, param);
      assert.match(e.message, message);
    });
  }
});

describe('over HTTP: a refused Responses request reserves nothing and reaches no provider', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('a built-in tool: 400 before any reservation, the provider never called', async () => {
    const w = await h.wallet(1_000_000);
    const res = await fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-small', input: 'run this', tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }),
    });
    assert.equal(res.status, 400);
    assert.equal((await res.json()).param, 'tools[0]');
    assert.equal(h.fake.received.length, 0);
    assert.deepEqual(await h.balance(w.account), { balance_usdc: 1_000_000, locked_usdc: 0, available_usdc: 1_000_000 });
    const rows = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).execute();
    assert.equal(rows.length, 0);
  });
});
