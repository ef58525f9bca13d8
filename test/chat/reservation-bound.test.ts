import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { countTokens } from 'gpt-tokenizer';
import OpenAI from 'openai';
import { fakePromptTokens, fakeTokens } from '../../src/fake-providers/fake-openai.ts';
import { priceRequest } from '../../src/providers/pricing.ts';
import { ENGINES } from '../support/engines.ts';
import { MODELS, readSse, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

/**
 * The reservation must bound what the provider can bill for the request as forwarded. Counting
 * only `messages` and `tools`, a big `response_format` schema or
 * `functions` list would be served on a few micro-USDC of reservation and the operator paid the rest.
 * The fake provider bills schemas, function definitions and tool definitions as prompt tokens, as
 * real providers do. Every model here bills 1.2 micro-USDC a prompt token, 2.4 a completion token.
 */
const LONG = { provider: 'fake', name: 'long-context', contextLength: 2_000_000, maxOutputTokens: 4096, promptCostPer1M: '1', completionCostPer1M: '2' };
const VISION = { ...LONG, name: 'vision', contextLength: 100_000, inputs: ['text', 'image'], partTokenBounds: { image: 1600 } };
const ANSWER = 'Hello from the fake provider, a stand-in for a paid model.';

/** A json_schema response_format of about `bytes` bytes: many described string properties. */
function bigSchema(bytes: number) {
  const count = Math.ceil(bytes / 1000);
  const properties = Object.fromEntries(Array.from({ length: count }, (_, i) => [`field_${i}`, { type: 'string', description: 'd'.repeat(970) }]));
  return {
    type: 'json_schema' as const,
    json_schema: { name: 'big', strict: true, schema: { type: 'object', properties, required: Object.keys(properties), additionalProperties: false } },
  };
}

/** What the fake provider bills (micro-USDC, billed prices) for `body` as the gateway forwards it. */
function providerBill(h: ChatHarness, body: Record<string, unknown>, partTokens = 0): number {
  const model = h.gw.services.catalog.byId.get(`fake/${String(body.model).replace(/^fake\//, '')}`)!;
  const forwarded = { ...body, model: model.upstreamName };
  return priceRequest(model, { promptTokens: fakePromptTokens(forwarded, partTokens), completionTokens: fakeTokens(ANSWER) }).chargeUsdc;
}

for (const engine of ENGINES) {
  describe(`the reservation bounds everything the provider bills (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine, { models: [...MODELS, LONG, VISION] });
    });
    afterEach(async () => {
      h.fake.behaviour = {};
      await h.gw.assertLedger();
    });
    after(() => h.stop());

    const chat = (key: string, body: Record<string, unknown>) => call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${key}` });

    test('a tiny message with a 3.9 MB response_format schema is reserved in full; a wallet that cannot cover it gets 402 before the provider is called', async () => {
      const body = { model: 'fake/long-context', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 16, response_format: bigSchema(3_900_000) };
      assert.ok(JSON.stringify(body).length > 3_900_000);
      const bill = providerBill(h, body);
      assert.ok(bill > 1_000_000, `the provider bills ${bill} micro-USDC for the schema`);

      const poor = await h.wallet(1_000_000);
      const calls = h.fake.received.length;
      const refused = await chat(poor.key, body);
      assert.equal(refused.status, 402, 'a 1 USD wallet cannot pay for a ~1M-token prompt');
      assert.equal(refused.body.error, 'INSUFFICIENT_BALANCE');
      assert.ok(refused.body.required_usdc >= bill, `reserved ${refused.body.required_usdc} covers the provider's bill of ${bill}`);
      assert.equal(h.fake.received.length, calls, 'the provider was never called');
      assert.deepEqual(await h.balance(poor.account), { balance_usdc: 1_000_000, locked_usdc: 0, available_usdc: 1_000_000 });

      const rich = await h.wallet(10_000_000);
      const { data, response } = await h.client(rich.key).chat.completions.create(body).withResponse();
      assert.equal(data.usage!.prompt_tokens, fakePromptTokens(h.fake.received.at(-1)!.body, 0), 'the provider billed the schema as prompt');
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      assert.equal(charged, bill, 'the whole provider bill is charged, nothing written off');
      assert.ok(charged <= refused.body.required_usdc);
      assert.deepEqual(await h.balance(rich.account), { balance_usdc: 10_000_000 - charged, locked_usdc: 0, available_usdc: 10_000_000 - charged });
    });

    test('10 parallel requests with a large legacy functions field from a 1 USD wallet: the provider is never asked for more than the balance covers', async () => {
      const functions = Array.from({ length: 40 }, (_, i) => ({
        name: `fn_${i}`,
        description: 'x'.repeat(9_400),
        parameters: { type: 'object', properties: {} },
      }));
      const body = { model: 'chat-small', messages: [{ role: 'user', content: 'call one' }], max_tokens: 64, functions };
      const bill = providerBill(h, body);
      const FUNDS = 1_000_000;
      assert.ok(10 * bill > FUNDS, `ten requests would cost the operator ${10 * bill}`);
      const w = await h.wallet(FUNDS);
      const client = h.client(w.key);
      const calls = h.fake.received.length;

      const results = await Promise.allSettled(
        Array.from({ length: 10 }, () => client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming).withResponse()),
      );
      const served = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
      assert.ok(refused.length > 0, 'the wallet cannot cover ten');
      for (const err of refused) assert.ok(err instanceof OpenAI.APIError && err.status === 402, String(err));

      const received = h.fake.received.slice(calls);
      assert.equal(received.length, served.length, 'refused requests never reached the provider');
      const billedByProvider = received.reduce((sum, r) => sum + providerBill(h, { ...r.body, model: 'chat-small' }), 0);
      assert.ok(billedByProvider <= FUNDS, `the provider billed ${billedByProvider} against a balance of ${FUNDS}`);
      const charged = served.map((s) => Number(s.response.headers.get('x-tollgate-charged-usdc')));
      assert.deepEqual(
        charged,
        served.map(() => bill),
        'every served request is charged its whole bill: no shortfall',
      );
      const total = charged.reduce((a, b) => a + b, 0);
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS - total, locked_usdc: 0, available_usdc: FUNDS - total });
    });

    test('non-text parts the model does not declare are 400 naming the part; the provider is not called', async () => {
      const w = await h.wallet(1_000_000);
      const calls = h.fake.received.length;
      const cases: [unknown, RegExp][] = [
        [
          { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } },
          /^messages\[1\]\.content\[1\] is an image_url part; model fake\/chat-small does not accept images/,
        ],
        [
          { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } },
          /^messages\[1\]\.content\[1\] is an input_audio part; model fake\/chat-small does not accept audio/,
        ],
        [
          { type: 'file', file: { file_data: 'data:application/pdf;base64,AAAA', filename: 'a.pdf' } },
          /^messages\[1\]\.content\[1\] is a file part; model fake\/chat-small does not accept files/,
        ],
        [
          { type: 'video_url', video_url: { url: 'https://example.com/v.mp4' } },
          /^messages\[1\]\.content\[1\] is a "video_url" part, which this gateway does not accept/,
        ],
        [{ text: 'no type' }, /^messages\[1\]\.content\[1\] must be an object with a string type/],
      ];
      for (const [part, pattern] of cases) {
        const res = await chat(w.key, {
          model: 'chat-small',
          messages: [
            { role: 'system', content: 'be brief' },
            { role: 'user', content: [{ type: 'text', text: 'what is this?' }, part] },
          ],
        });
        assert.equal(res.status, 400, JSON.stringify(part));
        assert.match(res.body.message, pattern);
      }
      const objectContent = await chat(w.key, { model: 'chat-small', messages: [{ role: 'user', content: { type: 'image_url' } }] });
      assert.match(objectContent.body.message, /^messages\[0\]\.content must be a string or an array of content parts/);
      const image = { type: 'image_url', image_url: { url: 'https://example.com/cat.png' } };
      const vision = await chat(w.key, {
        model: 'fake/vision',
        messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }, image] }],
      });
      assert.match(
        vision.body.message,
        /^messages\[0\]\.content\[0\] is an input_audio part; model fake\/vision does not accept audio/,
        'declaring images does not admit audio',
      );
      assert.equal(h.fake.received.length, calls);
      assert.deepEqual(await h.balance(w.account), { balance_usdc: 1_000_000, locked_usdc: 0, available_usdc: 1_000_000 });
    });

    test("declared image parts are reserved at their configured bound, not their bytes, and the provider's bill stays inside the reservation", async () => {
      const dataUrl = `data:image/png;base64,${'A'.repeat(1_000_000)}`;
      const text = { type: 'text', text: 'describe both' };
      const withImages = {
        model: 'fake/vision',
        max_tokens: 100,
        messages: [
          {
            role: 'user',
            content: [
              text,
              { type: 'image_url', image_url: { url: dataUrl } },
              { type: 'image_url', image_url: { url: 'https://example.com/b.png', detail: 'high' } },
            ],
          },
        ],
      };
      const textOnly = { ...withImages, messages: [{ role: 'user', content: [text] }] };
      const poor = await h.wallet(1);
      const a = await chat(poor.key, withImages);
      const b = await chat(poor.key, textOnly);
      assert.equal(a.status, 402);
      const extra = a.body.required_usdc - b.body.required_usdc;
      // Two parts at 1600 tokens × 1.2, plus the two commas between parts.
      assert.ok(extra >= 2 * 1600 * 1.2 && extra <= 2 * 1600 * 1.2 + 10, `the images add ${extra} micro-USDC to the reservation`);

      h.fake.behaviour = { partTokens: 1600 };
      const w = await h.wallet(1_000_000);
      const { data, response } = await h
        .client(w.key)
        .chat.completions.create(withImages as OpenAI.ChatCompletionCreateParamsNonStreaming)
        .withResponse();
      assert.ok(data.usage!.prompt_tokens >= 3200, 'the provider billed both images');
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      assert.equal(charged, providerBill(h, withImages, 1600));
      assert.ok(charged <= a.body.required_usdc, `charge ${charged} within reservation ${a.body.required_usdc}`);
      assert.equal(h.fake.received.at(-1)!.body.messages[0].content[1].image_url.url, dataUrl, 'the image reaches the provider as sent');
    });

    test('estimated usage (the provider reported none) counts tools, functions and response_format, not only message text', async () => {
      const tools = [
        {
          type: 'function',
          function: { name: 'lookup', description: 'look it up '.repeat(500), parameters: { type: 'object', properties: { q: { type: 'string' } } } },
        },
      ];
      const responseFormat = { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', description: 'the answer '.repeat(300) } } };
      const functions = [{ name: 'legacy', description: 'an old function '.repeat(200) }];
      const inputsTokens = countTokens(JSON.stringify(tools)) + countTokens(JSON.stringify(responseFormat)) + countTokens(JSON.stringify(functions));
      h.fake.behaviour = { omitUsage: true };
      for (const stream of [false, true]) {
        const w = await h.wallet(1_000_000);
        const body = { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], tools, response_format: responseFormat, functions, stream };
        const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        assert.equal(res.status, 200);
        if (stream) assert.equal((await readSse(res)).at(-1), '[DONE]');
        else await res.text();
        const row = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).executeTakeFirstOrThrow();
        assert.equal(Number(row.estimated), 1);
        assert.ok(
          Number(row.prompt_tokens) >= inputsTokens,
          `stream=${stream}: estimated ${row.prompt_tokens} prompt tokens; the tool, schema and function definitions alone are ${inputsTokens}`,
        );
      }
    });
  });
}
