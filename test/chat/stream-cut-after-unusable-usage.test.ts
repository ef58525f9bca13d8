import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, test } from 'node:test';
import { startChatHarness, readSse, type ChatHarness } from '../support/chat-harness.ts';

/*
 * attack: an OpenAI-compatible provider that puts a prompt-only usage ({prompt_tokens} and no
 * completion_tokens: unusable) on its first chunk, then ends its body cleanly mid-answer: no
 * finish_reason, no final usage, no [DONE]. That is "the provider ended the stream early" (error
 * event, nothing charged); a change that counted any usage object as the end billed it as complete
 * and ended it with [DONE] (caught by a review before it landed).
 */
let h: ChatHarness;
let provider: Server;
before(async () => {
  provider = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const base = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'chat-small' };
      res.write(
        `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: 'Part ' }, finish_reason: null }], usage: { prompt_tokens: 100 } })}\n\n`,
      );
      for (let i = 0; i < 30; i++)
        res.write(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta: { content: `w${i} ` }, finish_reason: null }] })}\n\n`);
      res.end(); // cut short upstream, cleanly
    });
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const port = (provider.address() as { port: number }).port;
  h = await startChatHarness('sqlite', {}, { fakeProvider: { baseUrl: `http://127.0.0.1:${port}/v1` } });
});
after(async () => {
  await h.stop();
  await new Promise((r) => provider.close(r));
});

test('a stream cut upstream after an unusable early usage ends with the error event, nothing charged', async () => {
  const w = await h.wallet(1_000_000);
  const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
    body: JSON.stringify({ model: 'chat-small', messages: [{ role: 'user', content: 'write' }], stream: true, stream_options: { include_usage: true } }),
  });
  assert.equal(res.status, 200);
  const events = await readSse(res);
  await h.gw.assertLedger();
  const charged = 1_000_000 - Number((await h.balance(w.account)).balance_usdc);
  const last = events.slice(-2).join(' | ');
  assert.ok(
    events.some((e) => e.includes('upstream_error')),
    `no error event; the client saw: ${last}; charged ${charged}`,
  );
  assert.equal(charged, 0);
});
