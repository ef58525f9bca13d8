import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { embed, embedMany } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { OpenAIEmbeddings } from '@langchain/openai';
import { ENGINES } from '../support/engines.ts';
import { usageRowsOf } from '../support/usage-rows.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import { assertBilledOnce, EMBED_ID, expectedVector, fakeTokensOf, MICRO_PER_TOKEN, startEmbeddingsHarness } from '../support/embeddings-harness.ts';

const FUNDS = 1_000_000;

/** Each client with its defaults, billed exactly: the fake's reported tokens at 12 micro-USDC each. */
for (const engine of ENGINES) {
  describe(`embeddings through the real clients (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startEmbeddingsHarness(engine);
    });
    after(() => h.stop());

    test('openai SDK embeddings.create, one string, its default encoding (base64, decoded by the SDK)', async () => {
      const w = await h.wallet(FUNDS);
      const { data, response } = await h.client(w.key).embeddings.create({ model: EMBED_ID, input: 'hello world' }).withResponse();
      assert.equal(h.fake.received.at(-1)!.body.encoding_format, 'base64', 'the SDK asks for base64 by default');
      assert.equal(data.object, 'list');
      assert.equal(data.data.length, 1);
      assert.deepEqual(data.data[0]!.embedding, expectedVector('hello world'));
      assert.equal(data.data[0]!.object, 'embedding');
      const charged = fakeTokensOf(['hello world']) * MICRO_PER_TOKEN;
      // The charge rides on the usage, as on every protocol's (docs/api.md "The charge in the answer").
      assert.deepEqual(data.usage, {
        prompt_tokens: fakeTokensOf(['hello world']),
        total_tokens: fakeTokensOf(['hello world']),
        cost: charged / 1e6,
        charged_usdc: charged,
      });
      assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(charged));
      assert.equal(response.headers.get('x-tollgate-balance-usdc'), String(FUNDS - charged));
      await assertBilledOnce(h, w, FUNDS, fakeTokensOf(['hello world']));
    });

    test('openai SDK embeddings.create, a batch as floats, with dimensions and user forwarded', async () => {
      const w = await h.wallet(FUNDS);
      const input = ['the first document', 'a second, longer document about gateways', 'é€😀'];
      const res = await h.client(w.key).embeddings.create({ model: 'embed-small', input, encoding_format: 'float', dimensions: 5, user: 'end-user-1' });
      const sent = h.fake.received.at(-1)!.body;
      // The gateway always asks the provider for base64 and converts the vectors to the floats asked for.
      assert.deepEqual(sent, { model: 'embed-small', input, encoding_format: 'base64', dimensions: 5, user: 'end-user-1' });
      assert.deepEqual(
        res.data.map((d) => d.index),
        [0, 1, 2],
      );
      res.data.forEach((d, i) => assert.deepEqual(d.embedding, expectedVector(input[i]!, 5)));
      await assertBilledOnce(h, w, FUNDS, fakeTokensOf(input));
    });

    test('openai SDK embeddings.create with token arrays, raw base64 kept as OpenAI encodes it', async () => {
      const w = await h.wallet(FUNDS);
      const input = [
        [1, 2, 3],
        [40, 50],
      ];
      const res = await h.client(w.key).embeddings.create({ model: EMBED_ID, input, encoding_format: 'base64' });
      // Asked for explicitly, the SDK hands over OpenAI's base64 (little-endian float32) untouched.
      res.data.forEach((d, i) => {
        const bytes = Buffer.from(d.embedding as unknown as string, 'base64');
        const floats = Array.from({ length: bytes.length / 4 }, (_, j) => bytes.readFloatLE(j * 4));
        assert.deepEqual(floats, expectedVector(input[i]!));
      });
      await assertBilledOnce(h, w, FUNDS, 5);
    });

    test("AI SDK embed and embedMany (@ai-sdk/openai's embedding model, defaults)", async () => {
      const w = await h.wallet(FUNDS);
      const model = createOpenAI({ baseURL: `${h.gw.url}/v1`, apiKey: w.key }).embedding('embed-small');
      const one = await embed({ model, value: 'sunny day at the beach', maxRetries: 0 });
      // The AI SDK asks for floats and gets them; the provider is asked for base64 whatever the client asks.
      assert.equal(h.fake.received.at(-1)!.body.encoding_format, 'base64');
      assert.deepEqual(one.embedding, expectedVector('sunny day at the beach'));
      assert.equal(one.usage.tokens, fakeTokensOf(['sunny day at the beach']));
      const values = ['rainy afternoon in the city', 'snowy night in the mountains'];
      const many = await embedMany({ model, values, maxRetries: 0 });
      assert.deepEqual(
        many.embeddings,
        values.map((v) => expectedVector(v)),
      );
      const tokens = fakeTokensOf(['sunny day at the beach']) + fakeTokensOf(values);
      assert.equal(many.usage.tokens, fakeTokensOf(values));
      const rows = await usageRowsOf(h, w.keyId);
      assert.deepEqual(
        rows.map((r) => [Number(r.prompt_tokens), Number(r.charged_usdc)]),
        [fakeTokensOf(['sunny day at the beach']), fakeTokensOf(values)].map((t) => [t, t * MICRO_PER_TOKEN]),
      );
      assert.deepEqual(await h.balance(w.account), {
        balance_usdc: FUNDS - tokens * MICRO_PER_TOKEN,
        locked_usdc: 0,
        available_usdc: FUNDS - tokens * MICRO_PER_TOKEN,
      });
      await h.gw.assertLedger();
    });

    test("AI SDK embedMany through @ai-sdk/openai-compatible's embedding model (defaults)", async () => {
      const w = await h.wallet(FUNDS);
      const model = createOpenAICompatible({ name: 'tollgate', baseURL: `${h.gw.url}/v1`, apiKey: w.key }).embeddingModel(EMBED_ID);
      const values = ['a gateway forwards requests', 'and bills each one'];
      const many = await embedMany({ model, values, maxRetries: 0 });
      assert.equal(h.fake.received.at(-1)!.body.encoding_format, 'base64');
      assert.deepEqual(
        many.embeddings,
        values.map((v) => expectedVector(v)),
      );
      assert.equal(many.usage.tokens, fakeTokensOf(values));
      await assertBilledOnce(h, w, FUNDS, fakeTokensOf(values));
    });

    test("LangChain's OpenAIEmbeddings: embedQuery and embedDocuments (defaults)", async () => {
      const w = await h.wallet(FUNDS);
      const embeddings = new OpenAIEmbeddings({ model: 'embed-small', apiKey: w.key, configuration: { baseURL: `${h.gw.url}/v1` }, maxRetries: 0 });
      const query = await embeddings.embedQuery('what is a gateway?');
      assert.equal(h.fake.received.at(-1)!.body.encoding_format, 'base64', "LangChain leaves it to the openai SDK's default");
      assert.deepEqual(query, expectedVector('what is a gateway?'));
      const docs = ['A gateway forwards requests.', 'It bills each one.'];
      assert.deepEqual(
        await embeddings.embedDocuments(docs),
        docs.map((d) => expectedVector(d)),
      );
      const rows = await usageRowsOf(h, w.keyId);
      const tokens = [fakeTokensOf(['what is a gateway?']), fakeTokensOf(docs)];
      assert.deepEqual(
        rows.map((r) => [Number(r.prompt_tokens), Number(r.charged_usdc)]),
        tokens.map((t) => [t, t * MICRO_PER_TOKEN]),
      );
      const spent = (tokens[0]! + tokens[1]!) * MICRO_PER_TOKEN;
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS - spent, locked_usdc: 0, available_usdc: FUNDS - spent });
      await h.gw.assertLedger();
    });
  });
}
