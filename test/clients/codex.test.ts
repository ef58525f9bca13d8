import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { CLAUDE, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { countingProxy } from '../support/counting-proxy.ts';
import { docBlock } from '../../scripts/doc-blocks.mjs';
import { agentSuite, CHARGE_PER_CALL, FINAL_TEXT, FUNDS, OUTPUT_TOKENS, PROMPT_TOKENS, TOOL_OUTPUT, toolRoundTrip, type AgentRun } from './agent-run.ts';
import { CODEX, OFFLINE_SETTINGS, runCodex, writeCodexConfig } from './codex-harness.ts';

/**
 * The real Codex CLI (`codex exec`, 0.171.0) against /v1/responses, configured with docs/clients.md's
 * provider block and nothing else that changes how it talks to the gateway: streaming, its default
 * tools (a shell tool, web_search, its multi-agent namespace), `include: ["reasoning.encrypted_content"]`
 * with `store: false`, and `client_metadata`. Codex runs the shell tool itself; the round trip is
 * billed exactly on an OpenAI-compatible model and on an Anthropic model. A bad key fails at once, a
 * wallet too small for the request shows the gateway's message, and Codex never leaves 127.0.0.1.
 */

const PROMPT = 'Run `echo tollgate-tool-ran` and tell me what it printed.';

/** docs/clients.md's config.toml for this gateway and `model`, plus the settings that keep the test machine offline. */
function config(gatewayUrl: string, model: string): string {
  const documented = docBlock('codex-config').replace('https://tollgate.example.com', gatewayUrl).replace('openai/gpt-5.1-codex', model);
  assert.ok(documented.includes(gatewayUrl) && documented.includes(model), 'the documented block has the URL and model this test replaces');
  return documented + OFFLINE_SETTINGS;
}

describe('Codex CLI (the real binary, codex exec) against /v1/responses', {
  skip: CODEX ? false : 'the @openai/codex binary is not installed (test/package.json)',
}, () => {
  const suite = agentSuite(toolRoundTrip('exec_command', { cmd: `echo ${TOOL_OUTPUT}` }));
  let h: AnthropicHarness;
  before(() => {
    h = suite.harness();
  });
  const home = (model: string, gatewayUrl = h.gw.url) => writeCodexConfig(suite.tempDir('tollgate-codex-'), config(gatewayUrl, model));
  const exec = (dir: string, key: string, ...args: string[]) => runCodex(dir, ['exec', '--skip-git-repo-check', ...args], { TOLLGATE_API_KEY: key });

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

  /** Codex printed the scripted answer after running the tool, never tried the network, and each of its `calls` calls was billed exactly. */
  async function expectBilledRun(run: AgentRun, w: { account: any; keyId: number }, model: string, calls: number) {
    assert.equal(run.code, 0, `codex exited ${run.code}: ${run.stdout.slice(0, 500)} ${run.stderr.slice(-1500)}`);
    assert.equal(run.stdout.trim(), FINAL_TEXT);
    assert.deepEqual(run.connects, [], 'Codex tried to reach no host but the gateway');
    assert.deepEqual(
      await usageRows(w.keyId),
      Array.from({ length: calls }, () => ({ model, charged: CHARGE_PER_CALL, prompt: PROMPT_TOKENS, completion: OUTPUT_TOKENS })),
    );
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: FUNDS - calls * CHARGE_PER_CALL, locked: 0 });
  }

  test("an OpenAI-compatible model: Codex's default request (include, client_metadata, web_search and namespace tools) accepted, a shell tool round trip streamed and billed exactly; a second session resumes it", async () => {
    const w = await h.wallet(FUNDS);
    const dir = home('fake/chat-small');
    const run = await exec(dir, w.key, PROMPT);
    assert.match(run.stderr, new RegExp(`exec\\s[\\s\\S]*echo ${TOOL_OUTPUT}[\\s\\S]*succeeded`), 'Codex ran the shell command itself');
    await expectBilledRun(run, w, 'fake/chat-small', 2);

    const [first, second] = h.fake.received;
    assert.equal(first!.body.model, 'chat-small');
    assert.equal(first!.body.stream, true);
    const toolNames = first!.body.tools.map((t: any) => t.function.name);
    assert.ok(toolNames.includes('exec_command'), 'its function tools are sent');
    for (const dropped of ['web_search', 'multi_agent_v1', 'close_agent']) assert.ok(!toolNames.includes(dropped), `${dropped} is not sent`);
    for (const field of ['include', 'client_metadata', 'store', 'reasoning']) assert.equal(first!.body[field], undefined, `${field} is not sent`);
    const toolMessage = second!.body.messages.find((m: any) => m.role === 'tool');
    assert.match(JSON.stringify(toolMessage.content), new RegExp(TOOL_OUTPUT), 'the tool output went back as a tool message');

    // The same conversation, resumed: Codex sends the whole history (store is false), tool call and output included.
    h.fake.received.length = 0;
    const resumed = await exec(dir, w.key, 'resume', '--last', 'What did the command print?');
    await expectBilledRun(resumed, w, 'fake/chat-small', 3);
    const history = JSON.stringify(h.fake.received[0]!.body.messages);
    assert.ok(history.includes('and tell me what it printed'), "the first session's prompt is in the resumed request");
    assert.match(history, new RegExp(`${TOOL_OUTPUT}[\\s\\S]*What did the command print`), 'the earlier tool output comes before the new prompt');
  });

  test('an Anthropic model: translated to Messages, a shell tool round trip streamed and billed exactly', async () => {
    const w = await h.wallet(FUNDS);
    const run = await exec(home(`anth/${CLAUDE.name}`), w.key, PROMPT);
    await expectBilledRun(run, w, `anth/${CLAUDE.name}`, 2);
    assert.equal(h.fake.received.length, 0);
    const [first, second] = h.anthropic.received;
    assert.equal(first!.body.model, CLAUDE.upstreamName);
    assert.equal(first!.body.stream, true);
    assert.ok(first!.body.tools.some((t: any) => t.name === 'exec_command'));
    assert.ok(!first!.body.tools.some((t: any) => /web_search|multi_agent/.test(t.name ?? t.type)));
    const result = second!.body.messages.at(-1).content.find((b: any) => b.type === 'tool_result');
    assert.match(JSON.stringify(result.content), new RegExp(TOOL_OUTPUT));
  });

  // Codex 0.171.0 retries a 401 like a dropped stream (its stream_max_retries, 5 by default, with
  // backoff from 200 ms) and reads no header that would stop it: six attempts in about 7 s, then the
  // gateway's message. Bounded in seconds, not minutes; a provider block can lower it (docs/clients.md).
  test("a bad key fails within seconds: at most Codex's own six attempts, then the gateway's message", async () => {
    const counter = await countingProxy(h.gw.url);
    try {
      const run = await exec(home('fake/chat-small', counter.url), 'sk-not-a-real-key-000000000000000000000000', PROMPT);
      assert.notEqual(run.code, 0);
      assert.match(run.stderr, /401 Unauthorized: .*invalid or revoked API key/);
      const attempts = counter.count('/v1/responses');
      assert.ok(attempts >= 1 && attempts <= 6, `${attempts} attempts`);
      // A generous bound that documents the rule: no minutes of retries (measured about 7 s).
      assert.ok(run.ms < 30_000, `failed in ${Math.round(run.ms)} ms`);
    } finally {
      await counter.close();
    }
    assert.equal(h.anthropic.received.length + h.fake.received.length, 0);
  });

  test("a wallet too small for the request: Codex shows the gateway's 402 message, nothing reaches the provider or is charged", async () => {
    const funds = 50;
    const w = await h.wallet(funds);
    const run = await exec(home('fake/chat-small'), w.key, PROMPT);
    assert.notEqual(run.code, 0);
    assert.match(run.stdout + run.stderr, /available balance 50 micro-USDC cannot cover this request's reserved cost/);
    assert.equal(h.fake.received.length, 0);
    assert.deepEqual(await usageRows(w.keyId), []);
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: funds, locked: 0 });
  });
});
