import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { docBlock } from '../../scripts/doc-blocks.mjs';
import { countingProxy } from '../support/counting-proxy.ts';
import { GPT, GPT_BYTES, PRICES } from '../chat/small-wallet-models.ts';
import { CHARGE_PER_CALL, FINAL_TEXT, FUNDS, OUTPUT_TOKENS, PROMPT_TOKENS, runAgent, TOOL_OUTPUT, toolRoundTrip } from './agent-run.ts';

/**
 * The real Claude Code (pinned in test/package.json as @anthropic-ai/claude-code; its native binary comes
 * in the optional dependency @anthropic-ai/claude-code-linux-x64) run as `claude -p` against the
 * gateway, with fake upstreams of both kinds behind it: its default model (mapped by the operator
 * to a deployment with `aliases`), an Anthropic model by id, and an OpenAI-compatible model by id,
 * each streaming, with a tool round trip (Claude Code runs the Bash tool itself), billed exactly;
 * a $0.05 wallet at $1/$2 per million (served where the deployment names its tokenizer, else the 402
 * Claude Code shows names what would fit); and a bad key, which must fail fast instead of being
 * retried ten times.
 *
 * The only environment Claude Code needs for the gateway is ANTHROPIC_BASE_URL and
 * ANTHROPIC_API_KEY (plus ANTHROPIC_MODEL to choose a model). HOME (a temporary directory),
 * DISABLE_TELEMETRY and CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC only isolate the test machine:
 * Claude Code keeps its settings in HOME, and the two variables keep it off the network, which CI
 * does not have. They are not settings the client needs to work with the gateway.
 */

const ROOT = new URL('../../', import.meta.url).pathname;
const BINARY = [
  join(ROOT, 'test/node_modules/@anthropic-ai/claude-code-linux-x64/claude'),
  join(ROOT, 'test/node_modules/@anthropic-ai/claude-code/bin/claude.exe'),
].find((p) => existsSync(p));

/** Claude Code 2.1.332's own default model: what it sends when ANTHROPIC_MODEL is unset. */
const DEFAULT_MODEL = 'claude-opus-5-5';
/** The deployment the operator maps it to (an Anthropic provider, upstream name of their choice). */
const OPUS_DEPLOYMENT = { ...CLAUDE, name: 'opus', upstreamName: 'claude-upstream-opus', maxOutputTokens: 128_000, aliases: [DEFAULT_MODEL] };

const BASH_INPUT = { command: `echo ${TOOL_OUTPUT}`, description: 'Print a marker' };

/** $0.05, on models listed at $1 and $2 per million tokens (1 and 2 micro-USDC a token, no markup). */
const SMALL_WALLET = 50_000;
const CLAUDE_SMALL = { ...CLAUDE, name: 'claude-small-wallet', ...PRICES };
const SMALL_WALLET_CHARGE = PROMPT_TOKENS * 1 + OUTPUT_TOKENS * 2;

interface ClaudeRun {
  code: number | null;
  result: any;
  stderr: string;
  ms: number;
}

/**
 * The environment a docs/api.md block sets (its `export NAME=value` lines, comments dropped), with
 * the doc's example URL, key and model ids replaced by this test's: the blocks users copy are the
 * environment the real binary runs with here.
 */
function docEnv(block: string, replace: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of block.split('\n')) {
    const m = /^export (\w+)=('([^']*)'|\S+)/.exec(line.trim());
    if (!m) continue;
    const value = m[3] ?? m[2]!;
    env[m[1]!] = replace[value] ?? value;
  }
  return env;
}

/** `claude -p PROMPT --output-format json`, in a fresh HOME, with `env` added to the environment it needs. */
async function runClaude(
  env: Record<string, string>,
  prompt = 'Run `echo tollgate-tool-ran` with the Bash tool and tell me what it printed.',
): Promise<ClaudeRun> {
  const home = mkdtempSync(join(tmpdir(), 'tollgate-claude-'));
  try {
    const run = await runAgent(BINARY!, ['-p', prompt, '--output-format', 'json', '--allowedTools', 'Bash'], home, {
      HOME: home,
      DISABLE_TELEMETRY: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      ...env,
    });
    let result: any = null;
    try {
      result = JSON.parse(run.stdout);
    } catch {
      result = { unparsed: run.stdout };
    }
    return { code: run.code, result, stderr: run.stderr, ms: run.ms };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

describe('Claude Code (the real binary, claude -p) against /v1/messages', {
  skip: BINARY ? false : 'the @anthropic-ai/claude-code binary is not installed',
}, () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness(
      'sqlite',
      { models: [...MODELS, CLAUDE, OPUS_DEPLOYMENT, GPT, GPT_BYTES, CLAUDE_SMALL] },
      {},
      toolRoundTrip('Bash', BASH_INPUT),
    );
  });
  beforeEach(() => resetProviders(h));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  async function usageRows(keyId: number) {
    return (
      await h.gw.services.storage.db
        .selectFrom('request_usage')
        .select(['model', 'charged_usdc', 'prompt_tokens', 'completion_tokens'])
        .where('api_key_id', '=', keyId)
        .orderBy('id')
        .execute()
    ).map((r) => ({ model: r.model, charged: Number(r.charged_usdc), prompt: Number(r.prompt_tokens), completion: Number(r.completion_tokens) }));
  }

  /** The run succeeded with the scripted answer, after the tool ran, and each of its two calls was billed exactly. */
  async function expectToolRoundTripBilled(run: ClaudeRun, w: { account: any; keyId: number }, model: string, received: { body: any }[]) {
    assert.equal(run.code, 0, `claude exited ${run.code}: ${JSON.stringify(run.result).slice(0, 500)} ${run.stderr.slice(0, 500)}`);
    assert.equal(run.result.is_error, false);
    assert.equal(run.result.result, FINAL_TEXT);
    assert.equal(received.length, 2, 'one call for the tool use, one for the answer');
    const rows = await usageRows(w.keyId);
    assert.deepEqual(
      rows,
      [1, 2].map(() => ({ model, charged: CHARGE_PER_CALL, prompt: PROMPT_TOKENS, completion: OUTPUT_TOKENS })),
    );
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: FUNDS - 2 * CHARGE_PER_CALL, locked: 0 });
  }

  test('its default model, mapped by the operator to an Anthropic deployment: the request as Claude Code sends it (mid-conversation system message, context_management, output_config, adaptive thinking, betas), a Bash tool round trip, billed exactly', async () => {
    const w = await h.wallet(FUNDS);
    const run = await runClaude(docEnv(docBlock('claude-code-default-model'), { 'https://tollgate.example.com': h.gw.url, 'sk-...': w.key }));
    await expectToolRoundTripBilled(run, w, 'anth/opus', h.anthropic.received);

    const [first, second] = h.anthropic.received;
    assert.equal(first!.path, '/v1/messages');
    assert.equal(first!.body.model, 'claude-upstream-opus');
    assert.equal(first!.body.stream, true);
    // Claude Code asks for Opus's 128,000-token window; the deployment's limit is the same here.
    assert.equal(first!.body.max_tokens, 128_000);
    assert.ok(
      first!.body.messages.some((m: any) => m.role === 'system'),
      'the environment block reaches Anthropic as a mid-conversation system message',
    );
    assert.ok(first!.body.context_management && first!.body.output_config && first!.body.thinking && first!.body.metadata);
    // Its betas reach the provider (all of these are price-neutral), merged with the operator's (none here).
    const betas = String(first!.headers['anthropic-beta']).split(',');
    for (const beta of [
      'claude-code-20250219',
      'interleaved-thinking-2025-05-14',
      'context-management-2025-06-27',
      'advanced-tool-use-2025-11-20',
      'effort-2025-11-24',
    ])
      assert.ok(betas.includes(beta), `${beta} forwarded`);
    // The tool ran on this machine and its output went back as a tool_result.
    const result = second!.body.messages.at(-1).content.find((b: any) => b.type === 'tool_result');
    assert.match(JSON.stringify(result.content), new RegExp(TOOL_OUTPUT));
  });

  test("an Anthropic model by id (ANTHROPIC_MODEL=anth/claude-test): max_tokens lowered to the deployment's limit, tool round trip, billed exactly", async () => {
    const w = await h.wallet(FUNDS);
    const run = await runClaude(
      docEnv(docBlock('claude-code-anthropic-model'), {
        'https://tollgate.example.com': h.gw.url,
        'sk-...': w.key,
        'anthropic/claude-sonnet': 'anth/claude-test',
      }),
    );
    await expectToolRoundTripBilled(run, w, 'anth/claude-test', h.anthropic.received);
    const first = h.anthropic.received[0]!.body;
    assert.equal(first.model, 'claude-upstream');
    assert.equal(first.max_tokens, CLAUDE.maxOutputTokens);
    assert.ok(first.context_management, 'context_management is forwarded to Anthropic');
  });

  test("an OpenAI-compatible model (ANTHROPIC_MODEL=fake/chat-small): translated, Claude's fields dropped as documented, tool round trip, billed exactly", async () => {
    const w = await h.wallet(FUNDS);
    const run = await runClaude(
      docEnv(docBlock('claude-code-openai-model'), { 'https://tollgate.example.com': h.gw.url, 'sk-...': w.key, 'openrouter/qwen3-coder': 'fake/chat-small' }),
    );
    await expectToolRoundTripBilled(run, w, 'fake/chat-small', h.fake.received);
    assert.equal(h.anthropic.received.length, 0);
    const [first, second] = h.fake.received;
    assert.equal(first!.body.model, 'chat-small');
    assert.equal(first!.body.stream, true);
    assert.equal(first!.body.max_tokens, 4096, "Claude Code's 32,000 lowered to the model's output window");
    for (const field of ['context_management', 'output_config', 'thinking', 'reasoning_effort', 'metadata', 'user'])
      assert.equal(first!.body[field], undefined, `${field} is not sent to a model without reasoning`);
    assert.ok(first!.body.messages.filter((m: any) => m.role === 'system').length >= 2, 'the system prompt and the mid-conversation system message');
    assert.ok(first!.body.tools.some((t: any) => t.function.name === 'Bash'));
    const tool = second!.body.messages.find((m: any) => m.role === 'tool');
    assert.match(tool.content, new RegExp(TOOL_OUTPUT));
  });

  test("a wallet that cannot cover 128,000 tokens at the deployment's price works with the balance fit asked through ANTHROPIC_CUSTOM_HEADERS", async () => {
    // About 60,000 for the prompt bound plus 307,200 for 128,000 output tokens: more than this wallet has.
    const funds = 150_000;
    const w = await h.wallet(funds);
    const refused = await runClaude({ ANTHROPIC_BASE_URL: h.gw.url, ANTHROPIC_API_KEY: w.key });
    assert.equal(refused.result.is_error, true);
    assert.equal(refused.result.api_error_status, 402);
    assert.equal(h.anthropic.received.length, 0);

    const run = await runClaude({ ANTHROPIC_BASE_URL: h.gw.url, ANTHROPIC_API_KEY: w.key, ...docEnv(docBlock('claude-code-balance-fit'), {}) });
    assert.equal(run.code, 0, JSON.stringify(run.result).slice(0, 500));
    assert.equal(run.result.result, FINAL_TEXT);
    const sent = h.anthropic.received.map((r) => r.body.max_tokens);
    assert.equal(sent.length, 2);
    for (const maxTokens of sent) assert.ok(maxTokens >= h.gw.services.config.chat.fitMaxTokensFloor && maxTokens < 128_000, `fitted max_tokens ${maxTokens}`);
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: funds - 2 * CHARGE_PER_CALL, locked: 0 });
  });

  /** `claude -p` with the documented environment for `model` (docs/api.md), on a fresh $0.05 wallet. */
  async function onSmallWallet(model: string) {
    const w = await h.wallet(SMALL_WALLET);
    const env = docEnv(docBlock('claude-code-openai-model'), { 'https://tollgate.example.com': h.gw.url, 'sk-...': w.key, 'openrouter/qwen3-coder': model });
    return { w, run: await runClaude(env) };
  }

  /** Claude Code stopped on the gateway's 402 before any provider was called, and shows its message; the wallet is untouched. */
  async function expectRefusedOnSmallWallet(run: ClaudeRun, w: { account: any; keyId: number }, message: RegExp) {
    assert.equal(run.result.is_error, true, JSON.stringify(run.result).slice(0, 500));
    assert.equal(run.result.api_error_status, 402);
    assert.match(String(run.result.result), message, 'Claude Code shows what the 402 says');
    assert.equal(h.fake.received.length + h.anthropic.received.length, 0);
    assert.deepEqual(await usageRows(w.keyId), []);
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: SMALL_WALLET, locked: 0 });
  }

  test('a $0.05 wallet at $1/$2 per million, on a model whose deployment names its tokenizer (o200k): the tool round trip runs, each call billed exactly', async () => {
    const { w, run } = await onSmallWallet('fake/gpt-small-wallet');
    assert.equal(run.code, 0, `claude exited ${run.code}: ${JSON.stringify(run.result).slice(0, 500)} ${run.stderr.slice(0, 500)}`);
    assert.equal(run.result.result, FINAL_TEXT);
    assert.equal(h.fake.received.length, 2, 'one call for the tool use, one for the answer');
    assert.deepEqual(
      await usageRows(w.keyId),
      [1, 2].map(() => ({ model: 'fake/gpt-small-wallet', charged: SMALL_WALLET_CHARGE, prompt: PROMPT_TOKENS, completion: OUTPUT_TOKENS })),
    );
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: SMALL_WALLET - 2 * SMALL_WALLET_CHARGE, locked: 0 });
  });

  test("a $0.05 wallet on the same model without a tokenizer (the byte bound): Claude Code shows the 402's figures, the max_tokens the balance covers", async () => {
    const { w, run } = await onSmallWallet('fake/gpt-no-tokenizer');
    await expectRefusedOnSmallWallet(run, w, new RegExp(`max_tokens 4096: the ${SMALL_WALLET} available covers max_tokens up to \\d+`));
  });

  test("a $0.05 wallet on Claude (no public tokenizer: the byte bound): Claude Code shows the 402's smallest balance that runs the prompt", async () => {
    const { w, run } = await onSmallWallet('anth/claude-small-wallet');
    await expectRefusedOnSmallWallet(run, w, new RegExp(`its prompt alone needs \\d+ \\(at max_tokens 1\\), more than the ${SMALL_WALLET} available`));
  });

  test('a bad key fails fast: the 401 carries x-should-retry: false, so Claude Code does not retry it', async () => {
    const counter = await countingProxy(h.gw.url);
    try {
      const run = await runClaude({ ANTHROPIC_BASE_URL: counter.url, ANTHROPIC_API_KEY: 'sk-not-a-real-key-000000000000000000000000' });
      assert.equal(run.result.is_error, true);
      assert.equal(run.result.api_error_status, 401);
      assert.equal(counter.count('/v1/messages'), 1, 'one attempt, no retries');
      assert.ok(run.ms < 30_000, `failed in ${Math.round(run.ms)} ms`);
    } finally {
      await counter.close();
    }
    assert.equal(h.anthropic.received.length + h.fake.received.length, 0);
  });
});
