import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { anthropicMessagesInbound } from '../../src/protocols/anthropic-messages/inbound.ts';
import { planInbound } from '../../src/metered/plan/inbound.ts';
import { TOOL_SYSTEM_PROMPT_TOKENS } from '../../src/metered/plan/native.ts';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { signInProof } from '../support/siwe.ts';

const FUNDS = 1_000_000;
const NATIVE = 'anth/claude-test';
const TRANSLATED = 'fake/chat-small';
const HI = [{ role: 'user', content: 'hi' }];
/** An Anthropic model that also takes documents (PDFs). */
const CLAUDE_DOCS = { ...CLAUDE, name: 'claude-docs', inputs: ['text', 'image', 'file'], partTokenBounds: { image: 1600, file: 3000 } };
const PDF = { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQK' };

/**
 * POST /v1/messages, attacked by a key holder: the prompt bound must cover the bytes actually sent
 * upstream (whether the request was translated or passed through), the output bound is max_tokens
 * with any thinking budget inside it, fields billed beyond tokens are refused before anything is
 * reserved or sent, and a dashboard session cannot spend.
 */
for (const engine of ENGINES) {
  describe(`/v1/messages inbound security (${engine})`, () => {
    let h: AnthropicHarness;
    before(async () => {
      h = await startAnthropicHarness(engine, { models: [...MODELS, CLAUDE, CLAUDE_DOCS] });
    });
    beforeEach(() => resetProviders(h));
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const plan = (body: Record<string, unknown>) => planInbound(anthropicMessagesInbound, body, h.gw.services.catalog, h.gw.services.config);
    const post = (key: string, body: Record<string, unknown>, headers: Record<string, string> = { 'x-api-key': key }) =>
      fetch(`${h.gw.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

    async function expectRefusedBeforeAnything(w: { account: any; keyId: number }, res: Response, param: string) {
      assert.equal(res.status, 400);
      const body = await res.json();
      assert.equal(body.type, 'error');
      assert.equal(body.error.type, 'invalid_request_error');
      assert.equal(body.error.param, param);
      assert.equal(h.anthropic.received.length + h.fake.received.length, 0, 'nothing reached a provider');
      const rows = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).execute();
      assert.equal(rows.length, 0, 'nothing was reserved');
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS);
    }

    test('translated: the bound covers the bytes sent, which a tool input grows by escaping it into a JSON string', () => {
      const quotes = '"'.repeat(20_000);
      const p = plan({
        model: TRANSLATED,
        max_tokens: 10,
        messages: [
          ...HI,
          { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: { q: quotes } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] },
        ],
      });
      assert.equal(p.native, false);
      // The client's JSON holds the quotes escaped once (40 KB); the arguments string escapes them twice (80 KB).
      assert.ok(p.upstreamBytes.length > 80_000);
      assert.ok(p.promptUpperBound >= p.upstreamBytes.length, `${p.promptUpperBound} < ${p.upstreamBytes.length}`);
    });

    test('native: the bound covers every byte sent, cache_control and system blocks included', () => {
      const big = 'x'.repeat(30_000);
      const p = plan({ model: NATIVE, max_tokens: 10, system: [{ type: 'text', text: big, cache_control: { type: 'ephemeral' } }], messages: HI });
      assert.equal(p.native, true);
      assert.ok(p.promptUpperBound >= p.upstreamBytes.length);
    });

    test("native: only a document's encoded data is replaced by its bound; its title and context are text Anthropic bills", () => {
      const title = 't'.repeat(40_000);
      const p = plan({
        model: 'anth/claude-docs',
        max_tokens: 10,
        messages: [
          {
            role: 'user',
            content: [
              { type: 'document', source: PDF, title, context: title },
              { type: 'text', text: 'sum up' },
            ],
          },
        ],
      });
      assert.ok(p.promptUpperBound >= 2 * title.length, `${p.promptUpperBound} < ${2 * title.length}`);
    });

    test("native: tools add Anthropic's hidden tool system prompt on top of their bytes", () => {
      const without = plan({ model: NATIVE, max_tokens: 10, messages: HI });
      const withTool = plan({ model: NATIVE, max_tokens: 10, messages: HI, tools: [{ name: 'f', input_schema: { type: 'object' } }] });
      assert.ok(withTool.promptUpperBound - without.promptUpperBound >= TOOL_SYSTEM_PROMPT_TOKENS);
    });

    test('an image in a tool result is bounded as an image (native) and needs a model that declares images', async () => {
      const result = [
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] },
          ],
        },
      ];
      const p = plan({ model: NATIVE, max_tokens: 10, messages: result });
      assert.equal(p.parts.tokens, 1600);
      const w = await h.wallet(FUNDS);
      // chat-small declares no images: refused whichever way the image comes. Translated, the image
      // follows the tool message in a user message of its own, and the plan's refusal names that one.
      await expectRefusedBeforeAnything(w, await post(w.key, { model: TRANSLATED, max_tokens: 10, messages: result }), 'messages[1].content[0]');
    });

    test('the output bound is max_tokens: the thinking budget must fit inside it, and max_tokens is required', async () => {
      const w = await h.wallet(FUNDS);
      await expectRefusedBeforeAnything(
        w,
        await post(w.key, { model: NATIVE, max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 3000 }, messages: HI }),
        'thinking.budget_tokens',
      );
      await expectRefusedBeforeAnything(w, await post(w.key, { model: NATIVE, messages: HI }), 'max_tokens');
      // Above the model's limit it is lowered to it, not refused (clients choose it for Claude's window).
      const high = plan({ model: NATIVE, max_tokens: 100_000, thinking: { type: 'enabled', budget_tokens: 31_999 }, messages: HI });
      assert.equal(high.maxTokens, CLAUDE.maxOutputTokens);
      assert.equal(JSON.parse(high.upstreamBytes.toString()).max_tokens, CLAUDE.maxOutputTokens);
      assert.deepEqual(JSON.parse(high.upstreamBytes.toString()).thinking, { type: 'enabled', budget_tokens: CLAUDE.maxOutputTokens - 1 });
      assert.equal(high.responseHeaders?.['x-tollgate-max-tokens'], String(CLAUDE.maxOutputTokens));
      const p = plan({ model: NATIVE, max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: HI });
      assert.equal(JSON.parse(p.upstreamBytes.toString()).max_tokens, 2000);
      assert.equal(p.maxTokens, 2000);
    });

    for (const [name, extra, param] of [
      ['container (code execution by the hour)', { container: 'c1' }, 'container'],
      ['mcp_servers (remote tool calls)', { mcp_servers: [{ type: 'url', url: 'https://x', name: 'x' }] }, 'mcp_servers'],
      ['a server tool (web search, billed per search)', { tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 5 }] }, 'tools[0]'],
      ['a built-in client tool (hidden prompt)', { tools: [{ type: 'bash_20250124', name: 'bash' }] }, 'tools[0]'],
      [
        'a one-hour cache write (dearer than the cache-write price)',
        { system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral', ttl: '1h' } }] },
        'system[0].cache_control',
      ],
      ['a priority service tier', { service_tier: 'priority' }, 'service_tier'],
      [
        'a document made of content blocks (images inside, unmeasured)',
        {
          messages: [
            {
              role: 'user',
              content: [
                {
                  type: 'document',
                  source: { type: 'content', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] },
                },
              ],
            },
          ],
        },
        'messages[0].content[0].source',
      ],
      [
        'an image by Files API id (size not in the request)',
        { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }] }] },
        'messages[0].content[0].source',
      ],
      ["an unknown field (workspace_id acts on the operator's account)", { workspace_id: 'w' }, 'workspace_id'],
      ['server-side compaction (extra model calls)', { context_management: { edits: [{ type: 'compact_20260112' }] } }, 'context_management.edits[0]'],
      ['fast mode (billed at a premium)', { speed: 'fast' }, 'speed'],
      ['a pinned inference region (billed at a premium)', { inference_geo: 'us' }, 'inference_geo'],
      ['an output format (not reviewed)', { output_config: { format: { type: 'json_schema', schema: {} } } }, 'output_config.format'],
    ] as const) {
      test(`native: ${name} is refused before anything is reserved or sent`, async () => {
        const w = await h.wallet(FUNDS);
        await expectRefusedBeforeAnything(w, await post(w.key, { model: NATIVE, max_tokens: 10, messages: HI, ...extra }), param);
      });
    }

    test('translated: top_k and OpenAI-only fields are refused unless the operator lists them in extraFields; priced fields likewise', async () => {
      const w = await h.wallet(FUNDS);
      await expectRefusedBeforeAnything(w, await post(w.key, { model: TRANSLATED, max_tokens: 10, messages: HI, n: 4 }), 'n');
      await expectRefusedBeforeAnything(w, await post(w.key, { model: TRANSLATED, max_tokens: 10, messages: HI, top_k: 5 }), 'top_k');
      await expectRefusedBeforeAnything(w, await post(w.key, { model: TRANSLATED, max_tokens: 10, messages: HI, container: 'c1' }), 'container');
    });

    test('a dashboard session cannot spend on /v1/messages, as x-api-key or as Bearer', async () => {
      const w = await h.wallet(FUNDS);
      const opened = await call(h.gw.url, 'POST', '/v1/auth/session', await signInProof(w.account));
      assert.equal(opened.status, 201, opened.text);
      const token = opened.body.token as string;
      for (const headers of [{ 'x-api-key': token }, { authorization: `Bearer ${token}` }] as Record<string, string>[]) {
        const res = await post('', { model: NATIVE, max_tokens: 10, messages: HI }, headers);
        assert.equal(res.status, 401);
        const body = await res.json();
        assert.equal(body.error.type, 'authentication_error');
        assert.match(body.error.message, /dashboard session cannot be used here/);
      }
      assert.equal(h.anthropic.received.length, 0);
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS);
    });
  });
}
