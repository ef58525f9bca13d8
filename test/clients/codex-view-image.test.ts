import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { docBlock } from '../../scripts/doc-blocks.mjs';
import { CLAUDE } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { agentSuite, CHARGE_PER_CALL, FINAL_TEXT, FUNDS, toolRoundTrip } from './agent-run.ts';
import { CODEX, OFFLINE_SETTINGS, runCodex, writeCodexConfig } from './codex-harness.ts';
import { ONE_PIXEL_PNG, VISION_MODEL } from '../support/vision-model.ts';

const SHOT = '/tmp/tollgate-codex-shot.png';

/**
 * Codex offers its view_image tool on every turn, and answers a call of it with a function_call_output
 * whose output is an input_image part. On an OpenAI-compatible vision model that turn, and every later
 * one of the session, was a 400 ("a function_call_output carries text only here").
 */
describe('Codex CLI views an image on an OpenAI-compatible vision model', {
  skip: CODEX ? false : 'the @openai/codex binary is not installed (test/package.json)',
}, () => {
  const suite = agentSuite(toolRoundTrip('view_image', { path: SHOT }), { models: [...MODELS, CLAUDE, VISION_MODEL] });
  after(() => rmSync(SHOT, { force: true }));

  test('the view_image round trip: the image reaches the provider as a user image part after the tool message, both calls billed', async () => {
    const h = suite.harness();
    writeFileSync(SHOT, Buffer.from(ONE_PIXEL_PNG, 'base64'));
    const w = await h.wallet(FUNDS);
    const documented = docBlock('codex-config').replace('https://tollgate.example.com', h.gw.url).replace('openai/gpt-5.1-codex', 'fake/vision-small');
    const dir = writeCodexConfig(suite.tempDir('tollgate-codex-img-'), documented + OFFLINE_SETTINGS);
    const run = await runCodex(dir, ['exec', '--skip-git-repo-check', `Look at ${SHOT} and describe it.`], { TOLLGATE_API_KEY: w.key });
    assert.equal(run.code, 0, `codex exited ${run.code}: ${run.stdout.slice(0, 500)} ${run.stderr.slice(-1500)}`);
    assert.equal(run.stdout.trim(), FINAL_TEXT);
    assert.equal(h.fake.received.length, 2);
    const messages = h.fake.received[1]!.body.messages as any[];
    const tool = messages.findIndex((m) => m.role === 'tool');
    assert.ok(tool > 0, 'the tool output went back as a tool message');
    const next = messages[tool + 1];
    assert.equal(next?.role, 'user');
    assert.ok(
      next.content.some((p: any) => p.type === 'image_url' && /^data:image\/png;base64,/.test(p.image_url.url)),
      JSON.stringify(next).slice(0, 300),
    );
    const balance = await h.balance(w.account);
    assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: FUNDS - 2 * CHARGE_PER_CALL, locked: 0 });
  });
});
