import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { countTokens } from 'gpt-tokenizer';
import { ANTHROPIC_KEY, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { readSse } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { expectNothingCharged, usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';
import { FAKE_ANTHROPIC_CONTENT } from '../../src/fake-providers/fake-anthropic-answer.ts';

/**
 * Anthropic counts input without the cache terms; the gateway bills all three as prompt (130 tokens),
 * cache writes at 1.25× (the default for a model without cache prices).
 */
const USAGE = { input_tokens: 100, output_tokens: 50, cache_creation_input_tokens: 10, cache_read_input_tokens: 20 };
const CHARGE = 279; // 120 × 1.2 + 10 × 1.5 + 50 × 2.4
const FUNDS = 1_000_000;
const MESSAGES = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'hi' },
];
const MODEL = 'anth/claude-test';

/**
 * Chat completions in, Anthropic Messages upstream: the translation both ways, the stream's chunks,
 * the bill (cache terms included), and the failure matrix, with the ledger invariants after each.
 */
for (const engine of ENGINES) {
  describe(`Anthropic upstream (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(
        engine,
        { chat: { firstByteTimeoutSeconds: 1, idleTimeoutSeconds: 2, drainTimeoutSeconds: 2 } },
        { anthropicBeta: ['prompt-caching-2024-07-31'] },
      );
    });
    beforeEach(() => {
      h.anthropic.behaviour = { usage: USAGE };
      h.anthropic.received.length = 0;
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const post = (key: string, body: Record<string, unknown>, signal?: AbortSignal) =>
      fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, ...body }),
        signal,
      });

    const usageRows = (keyId: number) => usageRowsOf(h, keyId);
    const waitForRow = (keyId: number) => waitForUsageRow(h, keyId);

    /** Starts a stream, reads its first bytes, leaves; the usage row once the drain has billed it. */
    async function leaveAfterFirstChunk(w: { key: string; keyId: number }) {
      const abort = new AbortController();
      const res = await post(w.key, { messages: MESSAGES, stream: true }, abort.signal);
      await res.body!.getReader().read();
      abort.abort();
      const row = await waitForRow(w.keyId);
      assert.equal(row.status, 'client_disconnected');
      return row;
    }

    const expectUntouched = (w: { account: any; keyId: number }) => expectNothingCharged(h, w, FUNDS);

    test('JSON: translated to Messages with the configured headers, answered as a chat.completion, billed with the cache terms', async () => {
      const w = await h.wallet(FUNDS);
      const res = await post(w.key, { messages: MESSAGES, max_tokens: 300, stop: ['END'] });
      assert.equal(res.status, 200);
      const body = await res.json();
      assert.equal(body.object, 'chat.completion');
      assert.equal(body.choices[0].message.content, FAKE_ANTHROPIC_CONTENT);
      assert.equal(body.choices[0].finish_reason, 'stop');
      assert.deepEqual(body.usage.prompt_tokens_details, { cached_tokens: 20 });
      assert.equal(body.usage.prompt_tokens, 130);
      assert.equal(res.headers.get('x-tollgate-charged-usdc'), String(CHARGE));

      const [sent] = h.anthropic.received;
      assert.equal(sent!.path, '/v1/messages');
      assert.equal(sent!.headers['x-api-key'], ANTHROPIC_KEY);
      assert.equal(sent!.headers.authorization, undefined, 'the key travels in x-api-key only');
      assert.equal(sent!.headers['anthropic-version'], '2023-06-01');
      assert.equal(sent!.headers['anthropic-beta'], 'prompt-caching-2024-07-31');
      assert.equal(sent!.body.model, 'claude-upstream');
      assert.equal(sent!.body.max_tokens, 300);
      assert.deepEqual(sent!.body.system, [{ type: 'text', text: 'Be brief.' }]);
      assert.deepEqual(sent!.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
      assert.deepEqual(sent!.body.stop_sequences, ['END']);

      const [row] = await usageRows(w.keyId);
      assert.deepEqual(
        {
          p: Number(row!.prompt_tokens),
          c: Number(row!.completion_tokens),
          cached: Number(row!.cached_tokens),
          est: Number(row!.estimated),
          charged: Number(row!.charged_usdc),
        },
        { p: 130, c: 50, cached: 20, est: 0, charged: CHARGE },
      );
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
    });

    test('stream: role chunk, content, finish_reason, usage chunk, [DONE]; billed from message_delta', async () => {
      const w = await h.wallet(FUNDS);
      const res = await post(w.key, { messages: MESSAGES, stream: true, stream_options: { include_usage: true } });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type')!, /^text\/event-stream/);
      const events = await readSse(res);
      assert.equal(events.at(-1), '[DONE]');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
      assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
      const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
      assert.equal(text, FAKE_ANTHROPIC_CONTENT);
      assert.equal(chunks.at(-2).choices[0].finish_reason, 'stop');
      assert.deepEqual(chunks.at(-1).choices, []);
      assert.equal(chunks.at(-1).usage.prompt_tokens, 130);
      assert.equal(chunks.at(-1).usage.completion_tokens, 50);
      const row = await waitForRow(w.keyId);
      assert.equal(Number(row.charged_usdc), CHARGE);
      assert.equal(Number(row.estimated), 0);
    });

    test('stream without include_usage: the usage chunk is billed but not relayed', async () => {
      const w = await h.wallet(FUNDS);
      const events = await readSse(await post(w.key, { messages: MESSAGES, stream: true }));
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.ok(chunks.every((c) => c.usage === undefined));
      assert.equal(Number((await waitForRow(w.keyId)).charged_usdc), CHARGE);
    });

    test('tools round trip: tool-call deltas keep their index, finish_reason tool_calls, results go back as tool_result', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = {
        usage: USAGE,
        toolCalls: [
          { name: 'weather', input: { city: 'Paris' } },
          { name: 'time', input: { zone: 'CET' } },
        ],
      };
      const tools = [
        {
          type: 'function',
          function: { name: 'weather', description: 'Weather now', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
        },
        { type: 'function', function: { name: 'time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } },
      ];
      const events = await readSse(await post(w.key, { messages: MESSAGES, tools, tool_choice: 'required', stream: true }));
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      const calls = new Map<number, { id?: string; name?: string; args: string }>();
      for (const c of chunks) {
        for (const d of c.choices[0]?.delta?.tool_calls ?? []) {
          const call = calls.get(d.index) ?? { args: '' };
          if (d.id) call.id = d.id;
          if (d.function?.name) call.name = d.function.name;
          call.args += d.function?.arguments ?? '';
          calls.set(d.index, call);
        }
      }
      assert.deepEqual([...calls.keys()], [0, 1]);
      assert.deepEqual(JSON.parse(calls.get(0)!.args), { city: 'Paris' });
      assert.equal(calls.get(1)!.name, 'time');
      assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)!.choices[0].finish_reason, 'tool_calls');
      const sentTools = h.anthropic.received[0]!.body;
      assert.equal(sentTools.tools[0].input_schema.properties.city.type, 'string');
      assert.deepEqual(sentTools.tool_choice, { type: 'any' });

      h.anthropic.behaviour = { usage: USAGE };
      const res = await post(w.key, {
        tools,
        messages: [
          ...MESSAGES,
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: calls.get(0)!.id, type: 'function', function: { name: 'weather', arguments: calls.get(0)!.args } }],
          },
          { role: 'tool', tool_call_id: calls.get(0)!.id, content: 'sunny' },
        ],
      });
      assert.equal(res.status, 200);
      const turns = h.anthropic.received[1]!.body.messages;
      assert.deepEqual(turns[1], { role: 'assistant', content: [{ type: 'tool_use', id: calls.get(0)!.id, name: 'weather', input: { city: 'Paris' } }] });
      assert.deepEqual(turns[2], { role: 'user', content: [{ type: 'tool_result', tool_use_id: calls.get(0)!.id, content: 'sunny' }] });
    });

    for (const [field, extra] of [
      ['n', { n: 2 }],
      ['response_format', { response_format: { type: 'json_object' } }],
      ['stop', { stop: ['\n'] }],
      ['temperature', { temperature: 1.5 }],
    ] as const) {
      test(`a request Anthropic cannot honour (${field}) is a 400 naming it, before anything is reserved or sent`, async () => {
        const w = await h.wallet(FUNDS);
        const res = await post(w.key, { messages: MESSAGES, ...extra });
        assert.equal(res.status, 400);
        const body = await res.json();
        assert.equal(body.error, 'VALIDATION_ERROR');
        assert.equal(body.param, field);
        assert.equal(h.anthropic.received.length, 0);
        assert.equal((await usageRows(w.keyId)).length, 0, 'no reservation was made');
        assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
      });
    }

    for (const status of [400, 401, 429, 500, 529]) {
      test(`provider ${status}: 502 with Anthropic's message, nothing charged`, async () => {
        const w = await h.wallet(FUNDS);
        h.anthropic.behaviour = { failStatus: status };
        const res = await post(w.key, { messages: MESSAGES });
        assert.equal(res.status, 502);
        const body = await res.json();
        assert.equal(body.error, 'UPSTREAM_ERROR');
        assert.match(body.message, new RegExp(`provider answered ${status}: (injected failure ${status}|Overloaded); nothing was charged`));
        await expectUntouched(w);
      });
    }

    test('provider too slow to answer (first-byte timeout): 502, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { delayMs: 2500 };
      const res = await post(w.key, { messages: MESSAGES });
      assert.equal(res.status, 502);
      assert.match((await res.json()).message, /timed out/);
      await expectUntouched(w);
    });

    test('stream: overloaded_error mid-stream is the error event, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { usage: USAGE, overloadAfterChunks: 3 };
      const events = await readSse(await post(w.key, { messages: MESSAGES, stream: true }));
      assert.equal(events.at(-1), '[DONE]');
      const error = JSON.parse(events.at(-2)!).error;
      assert.equal(error.type, 'upstream_error');
      assert.match(error.message, /overloaded_error: Overloaded; nothing was charged/);
      assert.equal(
        events
          .slice(0, -2)
          .map((e) => JSON.parse(e).choices[0].delta.content)
          .join(''),
        'Hello from the ',
        'the three deltas before it arrived',
      );
      await expectUntouched(w);
    });

    test('stream: provider cut mid-stream: content, then the error event, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { usage: USAGE, cutAfterChunks: 3 };
      const events = await readSse(await post(w.key, { messages: MESSAGES, stream: true }));
      assert.equal(JSON.parse(events.at(-2)!).error.type, 'upstream_error');
      await expectUntouched(w);
    });

    test("stream: a client that disconnects is drained and billed the provider's full usage", async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { usage: USAGE, chunkDelayMs: 20 };
      const row = await leaveAfterFirstChunk(w);
      assert.equal(Number(row.estimated), 0, 'the usage of message_delta, read after the client left');
      assert.equal(Number(row.charged_usdc), CHARGE);
    });

    test('stream: a drain cut by its bound bills the prompt from message_start and estimates the output', async () => {
      const w = await h.wallet(FUNDS);
      // Each event is 300 ms apart: the 2 s drain ends after a few text deltas of the twelve.
      h.anthropic.behaviour = { usage: USAGE, chunkDelayMs: 300 };
      const row = await leaveAfterFirstChunk(w);
      assert.equal(Number(row.estimated), 1);
      assert.equal(Number(row.prompt_tokens), 130, 'message_start reported the prompt side exactly');
      assert.equal(Number(row.cached_tokens), 20);
      assert.ok(Number(row.completion_tokens) > 0 && Number(row.completion_tokens) < 50, 'the output produced before the cut, counted');
      assert.equal(Number(row.charged_usdc), Math.ceil(120 * 1.2 + 10 * 1.5 + Number(row.completion_tokens) * 2.4));
    });

    test('no usage in the JSON answer: billed from counted tokens, marked estimated', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { omitUsage: true, content: 'The quick brown fox jumps over the lazy dog.' };
      const res = await post(w.key, { messages: [{ role: 'user', content: 'Tell me about foxes, please.' }] });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
      const prompt = countTokens('Tell me about foxes, please.') + 3 + 3;
      const completion = countTokens('The quick brown fox jumps over the lazy dog.');
      const [row] = await usageRows(w.keyId);
      assert.deepEqual({ p: Number(row!.prompt_tokens), c: Number(row!.completion_tokens), est: Number(row!.estimated) }, { p: prompt, c: completion, est: 1 });
      assert.equal(Number(row!.charged_usdc), Math.ceil(prompt * 1.2 + completion * 2.4));
    });

    test('no usage in the stream: billed from the streamed text, marked estimated', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { omitUsage: true, content: 'one two three four five' };
      const events = await readSse(
        await post(w.key, { messages: [{ role: 'user', content: 'count' }], stream: true, stream_options: { include_usage: true } }),
      );
      assert.equal(events.at(-1), '[DONE]');
      const row = await waitForRow(w.keyId);
      assert.equal(Number(row.estimated), 1);
      assert.equal(Number(row.charged_usdc), Math.ceil((countTokens('count') + 6) * 1.2 + countTokens('one two three four five') * 2.4));
    });
  });
}
