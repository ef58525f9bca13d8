import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { decodeResponsesRequest } from '../../src/protocols/openai-responses/decode-request.ts';
import { droppedHeaders } from '../../src/protocols/openai-responses/dropped.ts';
import type { ApiError } from '../../src/refusal.ts';

/**
 * The fields Codex CLI sends on every turn (captured from 0.171.0), as the Responses decoder handles
 * them: accepted, not sent, named in x-tollgate-fields-dropped; the priced ones still refused.
 */

const shell = {
  type: 'function',
  name: 'exec_command',
  description: 'Runs a command',
  strict: false,
  parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
};
const namespace = {
  type: 'namespace',
  name: 'multi_agent_v1',
  description: 'Tools for spawning sub-agents.',
  tools: [{ type: 'function', name: 'spawn_agent', parameters: { type: 'object', properties: {} } }],
};
/** Reasoning an OpenAI Responses provider returned on an earlier turn, as Codex sends it back. */
const reasoning = {
  type: 'reasoning',
  id: 'rs_1',
  summary: [{ type: 'summary_text', text: 'Thinking about echo' }],
  encrypted_content: 'gAAAA'.repeat(20_000),
};

const codexTurn = (extra: Record<string, unknown> = {}) => ({
  model: 'chat-small',
  stream: false,
  store: false,
  tool_choice: 'auto',
  parallel_tool_calls: true,
  reasoning: { summary: 'auto' },
  include: ['reasoning.encrypted_content'],
  prompt_cache_key: 'session-1',
  client_metadata: { session_id: 'session-1', turn_id: 'turn-1' },
  tools: [shell, namespace, { type: 'web_search', external_web_access: false }],
  input: [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'You are Codex.' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Run echo hi' }] },
    reasoning,
    { type: 'function_call', call_id: 'call_1', name: 'exec_command', arguments: '{"cmd":"echo hi"}' },
    { type: 'function_call_output', call_id: 'call_1', output: 'hi' },
  ],
  ...extra,
});

const refusal = (f: () => unknown): ApiError => {
  try {
    f();
  } catch (e) {
    return e as ApiError;
  }
  throw new Error('expected a refusal');
};

describe("Codex's fields in the Responses decoder", () => {
  test('include reasoning.encrypted_content, client_metadata, web_search and namespace tools, reasoning items: accepted, none sent', () => {
    const out = decodeResponsesRequest(codexTurn()) as any;
    assert.deepEqual(
      out.tools.map((t: any) => t.function.name),
      ['exec_command'],
    );
    for (const field of ['include', 'client_metadata', 'store', 'reasoning']) assert.equal(out[field], undefined, field);
    assert.ok(!JSON.stringify(out.messages).includes('gAAAA'), 'the reasoning item is not in the messages');
    assert.deepEqual(
      out.messages.map((m: any) => m.role),
      ['system', 'user', 'assistant', 'tool'],
    );
    assert.deepEqual(droppedHeaders(codexTurn()), {
      'x-tollgate-fields-dropped': 'include,client_metadata,tools.multi_agent_v1,tools.web_search,input.reasoning',
    });
  });

  test('only dropped tools: the request goes on without tools', () => {
    const out = decodeResponsesRequest(codexTurn({ tools: [{ type: 'web_search' }] })) as any;
    assert.equal(out.tools, undefined);
  });

  test('a request with none of them names nothing', () => {
    assert.deepEqual(droppedHeaders({ model: 'chat-small', input: 'hi', tools: [shell], include: [] }), {});
  });

  test('a namespace name that is not a plain name is not echoed into the header', () => {
    assert.deepEqual(droppedHeaders({ input: 'hi', tools: [{ ...namespace, name: 'a\r\nx-evil: 1' }] }), { 'x-tollgate-fields-dropped': 'tools.namespace' });
  });

  test('a tool_choice naming web search, or a priced built-in tool beside them, is still refused by name', () => {
    const forced = refusal(() => decodeResponsesRequest(codexTurn({ tool_choice: { type: 'web_search' } })));
    assert.deepEqual([forced.status, forced.extra.param], [400, 'tool_choice']);
    const priced = refusal(() => decodeResponsesRequest(codexTurn({ tools: [shell, { type: 'code_interpreter', container: { type: 'auto' } }] })));
    assert.deepEqual([priced.status, priced.extra.param], [400, 'tools[1]']);
    assert.match(priced.message, /built-in code_interpreter tool.*billed per use/);
  });
});

describe("attack: Codex's fields over HTTP reach no provider and are billed as the provider's usage", () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  beforeEach(() => {
    h.fake.behaviour = { content: 'hi', usage: { prompt_tokens: 100, completion_tokens: 20 } };
    h.fake.received.length = 0;
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('a Codex turn with 100 kB of encrypted reasoning and a web_search tool: 200, the header names what was dropped, the provider sees neither, the charge is usage × price', async () => {
    const w = await h.wallet(1_000_000);
    const res = await fetch(`${h.gw.url}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(codexTurn()),
    });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(res.headers.get('x-tollgate-fields-dropped'), 'include,client_metadata,tools.multi_agent_v1,tools.web_search,input.reasoning');
    const answer = await res.json();
    assert.ok(!answer.output.some((item: any) => item.type === 'reasoning'), 'no reasoning items are returned');
    const sent = JSON.stringify(h.fake.received[0]!.body);
    for (const absent of ['gAAAA', 'web_search', 'multi_agent_v1', 'client_metadata', 'encrypted_content'])
      assert.ok(!sent.includes(absent), `${absent} not sent`);
    const rows = await h.gw.services.storage.db.selectFrom('request_usage').select(['charged_usdc']).where('api_key_id', '=', w.keyId).execute();
    assert.deepEqual(
      rows.map((r) => Number(r.charged_usdc)),
      [100 * 1.2 + 20 * 2.4],
    );
    assert.equal(answer.usage.input_tokens, 100);
  });
});
