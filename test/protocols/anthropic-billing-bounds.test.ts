import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { planChat } from '../../src/metered/plan/plan.ts';
import { responsesInbound } from '../../src/protocols/openai-responses/inbound.ts';
import { parseConfig } from '../../src/config/load.ts';
import { fakeInputTokens } from '../../src/fake-providers/fake-anthropic-answer.ts';
import { TOOL_SYSTEM_PROMPT_TOKENS } from '../../src/protocols/anthropic-messages/tools.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { priceRequest } from '../../src/providers/pricing.ts';
import { ApiError } from '../../src/refusal.ts';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';

/**
 * The Anthropic protocols' billing, attacked by a key holder: every route that
 * reaches an Anthropic provider must reserve for what Anthropic bills, including what the request's
 * bytes do not show, and must not forward a marker that Anthropic prices above the catalog.
 */

const config = parseConfig(
  {
    providers: { anth: { type: 'anthropic' } },
    models: [
      {
        provider: 'anth',
        name: 'claude',
        contextLength: 200_000,
        maxOutputTokens: 1000,
        promptCostPer1M: '1',
        completionCostPer1M: '1',
        cacheWriteCostPer1M: '1.25',
        cacheReadCostPer1M: '0.1',
      },
    ],
  },
  {},
);
const catalog = buildCatalog(config);
const HI = [{ role: 'user', content: 'hi' }];
const TOOL = { type: 'function', function: { name: 'f', parameters: { type: 'object' } } };
/** Anthropic's own figure for its tool system prompt with tool_choice auto (current models). */
const ANTHROPIC_TOOL_PROMPT = 346;

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  assert.fail('the request was accepted');
}

describe('chat completions and responses to an Anthropic provider: the bound covers the hidden tool prompt', () => {
  test("chat completions with one tiny tool reserves Anthropic's tool system prompt on top of the bytes", () => {
    const without = planChat({ model: 'anth/claude', max_tokens: 10, messages: HI }, catalog, config);
    const withTool = planChat({ model: 'anth/claude', max_tokens: 10, messages: HI, tools: [TOOL] }, catalog, config);
    assert.ok(withTool.promptUpperBound - without.promptUpperBound >= TOOL_SYSTEM_PROMPT_TOKENS, `${withTool.promptUpperBound} - ${without.promptUpperBound}`);
    assert.ok(withTool.promptUpperBound >= ANTHROPIC_TOOL_PROMPT + fakeInputTokens(JSON.parse(withTool.upstreamBytes.toString()), 0));
  });

  test('/v1/responses with a function tool to an Anthropic model reserves the tool system prompt too', () => {
    const body = { model: 'anth/claude', input: 'hi', max_output_tokens: 10, tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }] };
    const p = planChat(responsesInbound.decodeRequest(body), catalog, config);
    const bare = planChat(responsesInbound.decodeRequest({ ...body, tools: undefined }), catalog, config);
    assert.ok(p.promptUpperBound - bare.promptUpperBound >= TOOL_SYSTEM_PROMPT_TOKENS);
  });

  test('no tools, no allowance: a plain request is not over-reserved', () => {
    const p = planChat({ model: 'anth/claude', max_tokens: 10, messages: HI }, catalog, config);
    assert.ok(p.promptUpperBound < TOOL_SYSTEM_PROMPT_TOKENS, `${p.promptUpperBound}`);
  });
});

describe('chat completions to an Anthropic provider: one-hour cache writes are refused', () => {
  const ONE_HOUR = { type: 'ephemeral', ttl: '1h' };
  test('a user text part with cache_control ttl 1h is a 400 naming it, before anything is reserved', () => {
    const err = refusal(() =>
      planChat(
        { model: 'anth/claude', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'text', text: 'x'.repeat(5000), cache_control: ONE_HOUR }] }] },
        catalog,
        config,
      ),
    );
    assert.equal(err.status, 400);
    assert.equal(err.extra.param, 'messages[0].content[0].cache_control');
  });

  test('a system text part with cache_control ttl 1h is refused too', () => {
    const err = refusal(() =>
      planChat(
        { model: 'anth/claude', max_tokens: 10, messages: [{ role: 'system', content: [{ type: 'text', text: 'be brief', cache_control: ONE_HOUR }] }, ...HI] },
        catalog,
        config,
      ),
    );
    assert.equal(err.status, 400);
    assert.match(String(err.extra.param), /^messages\[0\]\.content\[0\]\.cache_control$/);
  });

  test('the 5-minute marker still goes through, as LiteLLM clients send it', () => {
    const p = planChat(
      { model: 'anth/claude', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'text', text: 'hello', cache_control: { type: 'ephemeral' } }] }] },
      catalog,
      config,
    );
    assert.match(p.upstreamBytes.toString(), /"cache_control":\{"type":"ephemeral"\}/);
  });
});

describe('an Anthropic model without cache prices: cache writes are not billed below what Anthropic charges', () => {
  const bare = buildCatalog(
    parseConfig(
      {
        providers: { anth: { type: 'anthropic' } },
        models: [{ provider: 'anth', name: 'claude', contextLength: 200_000, promptCostPer1M: '3', completionCostPer1M: '15' }],
      },
      {},
    ),
  );
  const model = bare.byId.get('anth/claude')!;

  test('a cache write costs 1.25x the prompt cost, and the charge covers it at the default 20% markup', () => {
    const usage = { promptTokens: 100_000, completionTokens: 0, cacheWriteTokens: 100_000 };
    const anthropicBill = 100_000 * 3 * 1.25; // micro-USDC: $3/M input, writes at 1.25x
    const priced = priceRequest(model, usage);
    assert.equal(priced.costUsdc, anthropicBill);
    assert.ok(priced.chargeUsdc >= anthropicBill, `charged ${priced.chargeUsdc} below Anthropic's ${anthropicBill}`);
  });

  test('an OpenAI-compatible model without cache prices bills exactly as before', () => {
    const openai = buildCatalog(
      parseConfig(
        {
          providers: { o: { type: 'openai-compatible', baseUrl: 'http://127.0.0.1:1' } },
          models: [{ provider: 'o', name: 'm', contextLength: 1000, promptCostPer1M: '3', completionCostPer1M: '15' }],
        },
        {},
      ),
    );
    const priced = priceRequest(openai.byId.get('o/m')!, { promptTokens: 1000, completionTokens: 0, cacheWriteTokens: 1000 });
    assert.equal(priced.costUsdc, 3000);
  });
});

for (const engine of ENGINES) {
  describe(`a tools request to an Anthropic provider is charged within its reservation (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine);
    });
    afterEach(async () => {
      resetProviders(h);
      await h.gw.assertLedger();
    });
    after(() => h.stop());

    test('chat completions with a tool: Anthropic bills its tool prompt, the charge stays within the reservation', async () => {
      const body = { model: 'anth/claude-test', max_tokens: 16, messages: HI, tools: [TOOL] };
      const plan = planChat(body, h.gw.services.catalog, h.gw.services.config);
      // What Anthropic bills: the request as rendered plus its hidden tool system prompt.
      const inputTokens = fakeInputTokens(JSON.parse(plan.upstreamBytes.toString()), 0) + ANTHROPIC_TOOL_PROMPT;
      resetProviders(h, { usage: { input_tokens: inputTokens } });
      const w = await h.wallet(1_000_000);
      const res = await call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${w.key}` });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.body.usage.prompt_tokens, inputTokens);
      const charged = Number(res.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > 0);
      assert.ok(charged <= plan.reservationUsdc, `charged ${charged} above the reservation of ${plan.reservationUsdc}`);
    });

    test("native /v1/messages with a cache_control write on a model without cache prices: the charge covers Anthropic's bill", async () => {
      // claude-test lists only prompt (1) and completion (2) costs per 1M, marked up 20%.
      const system = [{ type: 'text', text: 'policy '.repeat(12_000), cache_control: { type: 'ephemeral' } }];
      const written = 20_000;
      resetProviders(h, { usage: { input_tokens: 10, cache_creation_input_tokens: written, output_tokens: 5 } });
      const w = await h.wallet(1_000_000);
      const res = await call(h.gw.url, 'POST', '/v1/messages', { model: 'anth/claude-test', max_tokens: 16, system, messages: HI }, { 'x-api-key': w.key });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const anthropicBill = 10 * 1 + written * 1 * 1.25 + 5 * 2;
      const charged = Number(res.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged >= anthropicBill, `charged ${charged}, Anthropic bills the operator ${anthropicBill}`);
      const row = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).executeTakeFirstOrThrow();
      assert.equal(Number(row.provider_cost_usdc), anthropicBill, 'the recorded provider cost is what Anthropic charges');
    });
  });
}
