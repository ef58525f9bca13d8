import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';
import { EMBED_ID, startEmbeddingsHarness } from '../support/embeddings-harness.ts';

/*
 * attack: a provider (a proxy with counting off) reporting prompt_tokens 0 beside delivered vectors was
 * billed 0. Like a chat report of 0 output beside delivered text, it is no count: estimated.
 */
let h: ChatHarness;
before(async () => {
  h = await startEmbeddingsHarness('sqlite');
});
after(async () => {
  await h.gw.assertLedger();
  await h.stop();
});

test('vectors delivered for 2 inputs with usage.prompt_tokens 0 are charged something', async () => {
  h.fake.behaviour = { usage: { prompt_tokens: 0, completion_tokens: 0 } };
  const w = await h.wallet(1_000_000);
  const res = await call(
    h.gw.url,
    'POST',
    '/v1/embeddings',
    { model: EMBED_ID, input: ['a long input to embed, '.repeat(50), 'another'] },
    { authorization: `Bearer ${w.key}` },
  );
  assert.equal(res.status, 200, res.text);
  await h.gw.assertLedger();
  assert.equal(res.body.data.length, 2);
  const charged = Number(res.headers.get('x-tollgate-charged-usdc'));
  assert.ok(charged > 0, `charged ${charged} (estimated: ${res.headers.get('x-tollgate-usage-estimated')})`);
});
