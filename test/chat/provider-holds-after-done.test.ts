import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, afterEach, before, describe, test } from 'node:test';
import { readSse, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';

/*
 * A provider that sends its whole answer, the usage chunk and `data: [DONE]`, then keeps the
 * response open instead of ending it (a proxy that holds the chunked body open, a server that ends
 * its responses late). The provider has said the answer is complete. The defect: the gateway kept
 * reading until the body ended, so the provider's idle timeout fired, and the answer the client had
 * already received whole was then turned into a failure: the error event after its last chunk, and
 * nothing charged for an answer the provider billed (the agent, told it failed, sends it again).
 */
const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
/** 100 × 1.2 + 50 × 2.4 micro-USDC (chat-small's listed price). */
const CHARGE = 240;

describe('a provider that holds its stream open after [DONE]', () => {
  let h: ChatHarness;
  let provider: Server;
  const open: ServerResponse[] = [];

  before(async () => {
    provider = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
          `data: ${JSON.stringify({ id: 'chatcmpl-held', object: 'chat.completion.chunk', created: 1, model: 'chat-small', choices, ...extra })}\n\n`;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]));
        res.write(chunk([{ index: 0, delta: { content: 'The whole answer.' }, finish_reason: null }]));
        res.write(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]));
        res.write(chunk([], { usage: { ...USAGE, total_tokens: 150 } }));
        res.write('data: [DONE]\n\n');
        open.push(res); // never ended
      });
    });
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    const url = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
    // A short provider idle timeout, so the test does not wait the default minute.
    h = await startChatHarness('sqlite', { providers: { fake: { baseUrl: url } }, chat: { idleTimeoutSeconds: 2 } });
  });
  afterEach(() => h.gw.assertLedger());
  after(async () => {
    for (const res of open) res.destroy();
    await h.stop();
    provider.closeAllConnections();
    provider.close();
  });

  test('the answer ends as complete at [DONE]: no error event, charged once for the reported usage', async () => {
    const w = await h.wallet(FUNDS);
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }),
    });
    assert.equal(res.status, 200);
    const events = await readSse(res);
    assert.equal(events.at(-1), '[DONE]');
    assert.ok(!events.some((e) => e !== '[DONE]' && JSON.parse(e).error), `no error event after a complete answer: ${events.join(' | ')}`);
    assert.equal(JSON.parse(events.at(-2)!).usage?.charged_usdc, CHARGE);
    const row = await waitForUsageRow(h, w.keyId);
    assert.deepEqual([row.status, Number(row.charged_usdc)], ['ok', CHARGE]);
    assert.equal((await usageRowsOf(h, w.keyId)).length, 1);
    assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
  });
});
