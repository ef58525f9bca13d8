import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { MODELS, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';

/**
 * `fake/cached` costs 1 / 2 micro-USDC per prompt / completion token and 0.5 per cached prompt
 * token; with the harness's 20% markup it bills 1.2, 2.4 and 0.6.
 */
const CACHED_MODEL = {
  provider: 'fake',
  name: 'cached',
  contextLength: 100_000,
  maxOutputTokens: 4096,
  promptCostPer1M: '1',
  completionCostPer1M: '2',
  cachedPromptCostPer1M: '0.5',
};
const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50, cached_tokens: 40 };
const CHARGE = 60 * 1.2 + 40 * 0.6 + 50 * 2.4; // 216, exact
const COST = 60 * 1 + 40 * 0.5 + 50 * 2; // 180

for (const engine of ENGINES) {
  describe(`chat bills OpenAI cached prompt tokens at their own price (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine, { models: [...MODELS, CACHED_MODEL] });
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const usageRow = (keyId: number) =>
      h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', keyId).executeTakeFirstOrThrow();

    for (const stream of [false, true]) {
      test(`${stream ? 'streaming' : 'non-streaming'}: the cached part is charged at the cached price and recorded`, async () => {
        h.fake.behaviour = { usage: USAGE };
        const w = await h.wallet(FUNDS);
        const client = h.client(w.key);
        const messages = [{ role: 'user' as const, content: 'the same long system prompt as last time' }];
        if (stream) {
          for await (const chunk of await client.chat.completions.create({
            model: 'fake/cached',
            messages,
            stream: true,
            stream_options: { include_usage: true },
          })) {
            if (chunk.usage) assert.equal(chunk.usage.prompt_tokens_details?.cached_tokens, 40, 'the usage chunk reaches the client as reported');
          }
        } else {
          const { response } = await client.chat.completions.create({ model: 'fake/cached', messages }).withResponse();
          assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(CHARGE));
        }
        assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
        const row = await usageRow(w.keyId);
        assert.deepEqual(
          [Number(row.prompt_tokens), Number(row.cached_tokens), Number(row.charged_usdc), Number(row.provider_cost_usdc)],
          [100, 40, CHARGE, COST],
        );
      });
    }

    test('a model without cache prices still bills cached tokens at the prompt price', async () => {
      h.fake.behaviour = { usage: USAGE };
      const w = await h.wallet(FUNDS);
      await h.client(w.key).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - (100 * 1.2 + 50 * 2.4));
    });

    test('more cached tokens than prompt tokens: billed as prompt-only, logged for the operator, never below', async () => {
      h.fake.behaviour = { usage: { prompt_tokens: 100, completion_tokens: 50, cached_tokens: 5000 } };
      const w = await h.wallet(FUNDS);
      const { response } = await h
        .client(w.key)
        .chat.completions.create({ model: 'fake/cached', messages: [{ role: 'user', content: 'hi' }] })
        .withResponse();
      assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(100 * 1.2 + 50 * 2.4));
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - 240);
      const warning = h.gw
        .logs()
        .split('\n')
        .find((l) => l.includes('more cached prompt tokens than prompt tokens') && l.includes(response.headers.get('x-request-id')!));
      assert.ok(warning, 'the operator sees which request reported the impossible split');
      assert.match(warning, /"cachedPromptTokens":5000/);
    });
  });
}
