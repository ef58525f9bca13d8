import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { countTokens } from 'gpt-tokenizer';
import { startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { expectNothingCharged, usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';
import { FAKE_ANTHROPIC_CONTENT } from '../../src/fake-providers/fake-anthropic-answer.ts';
import { sseBlocks } from '../support/sse.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 10, completion_tokens: 20 };
const CHARGE = 60; // 10 × 1.2 + 20 × 2.4
const CONTENT = 'Hello from the fake provider, a stand-in for a paid model.';

/** A Responses stream's events, parsed: `event:` names must match the `type` of each `data:`. */
async function readEvents(res: Response): Promise<any[]> {
  const blocks = sseBlocks(await res.text());
  return blocks.map((block) => {
    const [eventLine, dataLine] = block.split('\n');
    const data = JSON.parse(dataLine!.replace(/^data: /, ''));
    assert.equal(eventLine, `event: ${data.type}`);
    return data;
  });
}

const deltasOf = (events: any[]) =>
  events
    .filter((e) => e.type === 'response.output_text.delta')
    .map((e) => e.delta)
    .join('');

/**
 * POST /v1/responses on both engines: billed as chat is (JSON and stream, OpenAI-compatible and
 * Anthropic providers), and chat's failure matrix (provider 4xx/5xx, timeouts, cut streams,
 * disconnects, no usage) with the ledger invariants checked after every test.
 */
for (const engine of ENGINES) {
  describe(`POST /v1/responses (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine, { chat: { firstByteTimeoutSeconds: 1, idleTimeoutSeconds: 2, drainTimeoutSeconds: 5 } });
    });
    beforeEach(() => {
      h.fake.behaviour = { usage: USAGE };
      h.anthropic.behaviour = { usage: { input_tokens: 10, output_tokens: 20 } };
      h.fake.received.length = 0;
      h.anthropic.received.length = 0;
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const post = (key: string, body: Record<string, unknown>, path = '/v1/responses', signal?: AbortSignal) =>
      fetch(`${h.gw.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-small', ...body }),
        signal,
      });

    const usageRows = (keyId: number) => usageRowsOf(h, keyId);
    const waitForRow = (keyId: number) => waitForUsageRow(h, keyId);

    const expectUntouched = (w: { account: any; keyId: number }) => expectNothingCharged(h, w, FUNDS);

    test("JSON: a Response, billed from the provider's usage, one usage row", async () => {
      const w = await h.wallet(FUNDS);
      const res = await post(w.key, { input: 'hi' });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-charged-usdc'), String(CHARGE));
      assert.equal(res.headers.get('x-tollgate-balance-usdc'), String(FUNDS - CHARGE));
      const body = await res.json();
      assert.equal(body.output[0].content[0].text, CONTENT);
      assert.equal(body.store, true, 'kept by default, as OpenAI does (test/protocols/responses-store.test.ts)');
      const [row] = await usageRows(w.keyId);
      assert.deepEqual(
        { status: row!.status, p: Number(row!.prompt_tokens), c: Number(row!.completion_tokens), charged: Number(row!.charged_usdc) },
        { status: 'ok', p: 10, c: 20, charged: CHARGE },
      );
    });

    test('the same conversation costs the same through /v1/chat/completions and /v1/responses', async () => {
      h.fake.behaviour = {}; // the fake bills the prompt it received
      const w = await h.wallet(FUNDS);
      const chat = await post(
        w.key,
        {
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: 'What is a toll gate?' },
          ],
          max_tokens: 100,
        },
        '/v1/chat/completions',
      );
      const resp = await post(w.key, { instructions: 'Be brief.', input: 'What is a toll gate?', max_output_tokens: 100 });
      assert.deepEqual(h.fake.received[1]!.body.messages, h.fake.received[0]!.body.messages);
      assert.equal(resp.headers.get('x-tollgate-charged-usdc'), chat.headers.get('x-tollgate-charged-usdc'));
      const rows = await usageRows(w.keyId);
      assert.equal(rows.length, 2);
      assert.equal(rows[0]!.charged_usdc, rows[1]!.charged_usdc);
    });

    test('stream: billed from the usage chunk, which reaches the client in response.completed', async () => {
      const w = await h.wallet(FUNDS);
      const res = await post(w.key, { input: 'hi', stream: true });
      assert.match(res.headers.get('content-type')!, /^text\/event-stream/);
      const events = await readEvents(res);
      assert.equal(deltasOf(events), CONTENT);
      assert.equal(events.at(-1).type, 'response.completed');
      assert.equal(events.at(-1).response.usage.input_tokens, 10);
      assert.equal(Number((await waitForRow(w.keyId)).charged_usdc), CHARGE);
      assert.equal(h.fake.received[0]!.body.stream_options.include_usage, true, 'the gateway always asks for usage');
    });

    for (const status of [400, 429, 500, 503]) {
      test(`provider ${status}: a plain 502 in the configured error shape, nothing charged`, async () => {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { failStatus: status };
        const res = await post(w.key, { input: 'hi' });
        assert.equal(res.status, 502);
        const body = await res.json();
        assert.equal(body.error, 'UPSTREAM_ERROR');
        assert.match(body.message, new RegExp(`provider answered ${status}: injected failure ${status}; nothing was charged`));
        await expectUntouched(w);
      });
    }

    test('provider too slow to answer (first-byte timeout): 502, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { delayMs: 2500 };
      const res = await post(w.key, { input: 'hi' });
      assert.equal(res.status, 502);
      assert.match((await res.json()).message, /timed out/);
      await expectUntouched(w);
    });

    test('stream: the provider fails before streaming: response.created, then error and response.failed, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 500 };
      const res = await post(w.key, { input: 'hi', stream: true });
      assert.equal(res.status, 200);
      const events = await readEvents(res);
      assert.deepEqual(
        events.map((e) => e.type),
        ['response.created', 'response.in_progress', 'error', 'response.failed'],
      );
      assert.match(events[2].message, /provider answered 500: injected failure 500; nothing was charged/);
      assert.equal(events[3].response.status, 'failed');
      await expectUntouched(w);
    });

    test('stream: the provider is cut mid-stream: the text so far, then response.failed, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, cutAfterChunks: 3 };
      const events = await readEvents(await post(w.key, { input: 'hi', stream: true }));
      assert.equal(deltasOf(events), 'Hello from the ');
      assert.equal(events.at(-1).type, 'response.failed');
      assert.equal(events.at(-1).response.output[0].content[0].text, 'Hello from the ', 'the partial message, closed');
      await expectUntouched(w);
    });

    test('stream: the provider goes idle mid-stream (idle timeout): response.failed, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, chunkDelayMs: 3000 };
      const events = await readEvents(await post(w.key, { input: 'hi', stream: true }));
      assert.equal(events.at(-1).type, 'response.failed');
      await expectUntouched(w);
    });

    test("stream: a client that disconnects is drained and billed the provider's full usage", async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, chunkDelayMs: 20 };
      const abort = new AbortController();
      const res = await post(w.key, { input: 'hi', stream: true }, '/v1/responses', abort.signal);
      await res.body!.getReader().read();
      abort.abort();
      const row = await waitForRow(w.keyId);
      assert.equal(row.status, 'client_disconnected');
      assert.equal(Number(row.estimated), 0);
      assert.equal(Number(row.charged_usdc), CHARGE);
    });

    test("no usage in the JSON answer: billed from counted tokens, marked estimated; the Response's usage is the billed one, with the charge", async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { omitUsage: true, content: 'The quick brown fox jumps over the lazy dog.' };
      const res = await post(w.key, { input: 'Tell me about foxes, please.' });
      assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
      const usage = (await res.json()).usage;
      const [row] = await usageRows(w.keyId);
      const prompt = countTokens('Tell me about foxes, please.') + 3 + 3;
      const completion = countTokens('The quick brown fox jumps over the lazy dog.');
      assert.deepEqual({ p: Number(row!.prompt_tokens), c: Number(row!.completion_tokens), est: Number(row!.estimated) }, { p: prompt, c: completion, est: 1 });
      assert.deepEqual(
        { p: usage.input_tokens, c: usage.output_tokens, charged: usage.charged_usdc },
        { p: prompt, c: completion, charged: Number(row!.charged_usdc) },
      );
      assert.equal(res.headers.get('x-tollgate-charged-usdc'), String(usage.charged_usdc));
    });

    test('no usage in the stream: billed from the streamed text, marked estimated', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { omitUsage: true, content: 'one two three four five' };
      const events = await readEvents(await post(w.key, { input: 'count', stream: true }));
      assert.equal(events.at(-1).type, 'response.completed');
      const row = await waitForRow(w.keyId);
      assert.equal(Number(row.estimated), 1);
      // The usage that was billed (estimated), with its charge.
      assert.equal(events.at(-1).response.usage.charged_usdc, Number(row.charged_usdc));
      assert.equal(Number(row.charged_usdc), Math.ceil((countTokens('count') + 6) * 1.2 + countTokens('one two three four five') * 2.4));
    });

    test('Anthropic upstream, JSON: translated to Messages (instructions as system), answered as a Response', async () => {
      const w = await h.wallet(FUNDS);
      const res = await post(w.key, {
        model: 'anth/claude-test',
        instructions: 'Be brief.',
        input: [
          { role: 'developer', content: 'Answer in English.' },
          { role: 'user', content: 'hi' },
        ],
        max_output_tokens: 300,
      });
      assert.equal(res.status, 200);
      const body = await res.json();
      assert.equal(body.output[0].content[0].text, FAKE_ANTHROPIC_CONTENT);
      assert.equal(body.usage.input_tokens, 10);
      const sent = h.anthropic.received[0]!.body;
      assert.equal(sent.max_tokens, 300);
      assert.deepEqual(sent.system, [
        { type: 'text', text: 'Be brief.' },
        { type: 'text', text: 'Answer in English.' },
      ]);
      assert.deepEqual(sent.messages, [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }]);
      assert.equal(Number((await usageRows(w.keyId))[0]!.charged_usdc), CHARGE);
    });

    test('Anthropic upstream, stream: Responses events from Messages events, billed from message_delta', async () => {
      const w = await h.wallet(FUNDS);
      const events = await readEvents(await post(w.key, { model: 'anth/claude-test', input: 'hi', stream: true }));
      assert.equal(deltasOf(events), FAKE_ANTHROPIC_CONTENT);
      assert.equal(events.at(-1).type, 'response.completed');
      assert.equal(events.at(-1).response.usage.output_tokens, 20);
      assert.equal(Number((await waitForRow(w.keyId)).charged_usdc), CHARGE);
    });

    test('Anthropic upstream, stream: overloaded_error mid-stream is response.failed, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.anthropic.behaviour = { usage: { input_tokens: 10, output_tokens: 20 }, overloadAfterChunks: 3 };
      const events = await readEvents(await post(w.key, { model: 'anth/claude-test', input: 'hi', stream: true }));
      assert.equal(events.at(-1).type, 'response.failed');
      assert.match(events.at(-1).response.error.message, /overloaded_error: Overloaded; nothing was charged/);
      await expectUntouched(w);
    });
  });
}
