import assert from 'node:assert/strict';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { CLAUDE } from '../support/anthropic-harness.ts';
import { until } from '../support/until.ts';
import { docBlock } from '../../scripts/doc-blocks.mjs';
import { agentSuite, CHARGE_PER_CALL, FINAL_TEXT, FUNDS, runAgent, TOOL_OUTPUT, toolRoundTrip } from './agent-run.ts';

/**
 * The real opencode (1.18.34: its linux-x64 binary, the package opencode-linux-x64 that the opencode-ai
 * launcher runs, pinned in test/package.json) as `opencode run`, configured with docs/clients.md's
 * provider block: an OpenAI-compatible model through @ai-sdk/openai-compatible and an Anthropic model
 * through @ai-sdk/anthropic, streaming, its bash tool run by opencode, every call billed exactly
 * (opencode makes one more call without tools, for the session's title).
 */

const ROOT = new URL('../../', import.meta.url).pathname;
const OPENCODE = [join(ROOT, 'test/node_modules/opencode-linux-x64/bin/opencode')].find((p) => existsSync(p));

/**
 * Only keep the test machine offline: the models catalogue (models.opencode.ai), updates, default
 * plugins and LSP downloads. opencode still tries to install its plugin package from
 * registry.npmjs.org in the background, fails, and goes on.
 */
const OFFLINE_ENV = {
  OPENCODE_DISABLE_MODELS_FETCH: '1',
  OPENCODE_DISABLE_AUTOUPDATE: '1',
  OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
  OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
};
const TOLERATED_EGRESS = ['CONNECT registry.npmjs.org:443'];

/** docs/clients.md's opencode.json for this gateway and `model` (and, for an Anthropic model, its AI SDK package). */
function config(gatewayUrl: string, model: string, anthropic: boolean): string {
  const c = JSON.parse(docBlock('opencode-config'));
  const provider = c.provider.tollgate;
  provider.options.baseURL = provider.options.baseURL.replace('https://tollgate.example.com', gatewayUrl);
  if (anthropic) provider.npm = '@ai-sdk/anthropic';
  provider.models = { [model]: { ...(Object.values(provider.models)[0] as object), limit: { context: 100_000, output: 4096 } } };
  c.model = `tollgate/${model}`;
  return JSON.stringify(c);
}

describe('opencode (the real binary, opencode run)', { skip: OPENCODE ? false : 'the opencode-linux-x64 binary is not installed (test/package.json)' }, () => {
  const suite = agentSuite(toolRoundTrip('bash', { command: `echo ${TOOL_OUTPUT}`, description: 'Print a marker' }));

  /** `opencode run` in a project folder holding `configJson` as its opencode.json, with HOME and the XDG folders of its own. */
  function runOpencode(configJson: string, key: string) {
    const home = suite.tempDir('tollgate-opencode-');
    const project = join(home, 'project');
    mkdirSync(project);
    writeFileSync(join(project, 'opencode.json'), configJson);
    const xdg = Object.fromEntries(['CONFIG', 'DATA', 'CACHE', 'STATE'].map((d) => [`XDG_${d}_HOME`, join(home, d.toLowerCase())]));
    return runAgent(OPENCODE!, ['run', 'Run `echo tollgate-tool-ran` and tell me what it printed.'], project, {
      HOME: home,
      ...xdg,
      ...OFFLINE_ENV,
      TOLLGATE_API_KEY: key,
    });
  }

  for (const [model, anthropic] of [
    ['fake/chat-small', false],
    [`anth/${CLAUDE.name}`, true],
  ] as const) {
    test(`${model} through ${anthropic ? '@ai-sdk/anthropic' : '@ai-sdk/openai-compatible'}: the bash tool round trip, streamed, every call billed exactly`, async () => {
      const h = suite.harness();
      const w = await h.wallet(FUNDS);
      const run = await runOpencode(config(h.gw.url, model, anthropic), w.key);
      assert.equal(run.code, 0, `opencode exited ${run.code}: ${run.stdout.slice(0, 500)} ${run.stderr.slice(-1500)}`);
      assert.equal(run.stdout.trim(), FINAL_TEXT);
      assert.match(run.stderr, new RegExp(`echo ${TOOL_OUTPUT}\\s[\\s\\S]*${TOOL_OUTPUT}`), 'opencode ran the command');
      assert.deepEqual(
        run.connects.filter((c) => !TOLERATED_EGRESS.includes(c)),
        [],
      );

      const received = anthropic ? h.anthropic.received : h.fake.received;
      assert.ok(
        received.every((r) => r.body.stream === true),
        'every call streamed',
      );
      const withTools = received.filter((r) => r.body.tools?.length);
      assert.equal(withTools.length, 2, 'the tool call and the answer');
      assert.match(JSON.stringify(withTools[1]!.body.messages), new RegExp(TOOL_OUTPUT), 'the tool output went back');
      const usage = () => h.gw.services.storage.db.selectFrom('request_usage').select(['model', 'charged_usdc']).where('api_key_id', '=', w.keyId).execute();
      await until(async () => (await usage()).length === received.length, 'every call billed');
      assert.deepEqual(
        (await usage()).map((r) => ({ model: r.model, charged: Number(r.charged_usdc) })),
        received.map(() => ({ model, charged: CHARGE_PER_CALL })),
      );
      const balance = await h.balance(w.account);
      assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: FUNDS - received.length * CHARGE_PER_CALL, locked: 0 });
    });
  }
});
