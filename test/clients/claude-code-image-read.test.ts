import assert from 'node:assert/strict';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CLAUDE } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { agentSuite, CHARGE_PER_CALL, FINAL_TEXT, FUNDS, runAgent, toolRoundTrip } from './agent-run.ts';
import { ONE_PIXEL_PNG, VISION_MODEL } from '../support/vision-model.ts';

const ROOT = new URL('../../', import.meta.url).pathname;
const BINARY = [
  join(ROOT, 'test/node_modules/@anthropic-ai/claude-code-linux-x64/claude'),
  join(ROOT, 'test/node_modules/@anthropic-ai/claude-code/bin/claude.exe'),
].find((p) => existsSync(p));

const SHOT = '/tmp/tollgate-claude-shot.png';

/**
 * Claude Code's Read tool answers an image file with a tool_result holding an image block. On an
 * OpenAI-compatible vision model (translated), that turn, and every later one of the conversation,
 * was a 400: the session could not go on once Claude Code had looked at a picture.
 */
describe('Claude Code reads an image on an OpenAI-compatible vision model', {
  skip: BINARY ? false : 'the @anthropic-ai/claude-code binary is not installed',
}, () => {
  const suite = agentSuite(toolRoundTrip('Read', { file_path: SHOT }), { models: [...MODELS, CLAUDE, VISION_MODEL] });
  after(() => rmSync(SHOT, { force: true }));

  test('the Read tool round trip: the image reaches the provider as an image part after the tool message, both calls billed', async () => {
    const h = suite.harness();
    writeFileSync(SHOT, Buffer.from(ONE_PIXEL_PNG, 'base64'));
    const w = await h.wallet(FUNDS);
    const home = suite.tempDir('tollgate-claude-img-');
    const run = await runAgent(
      BINARY!,
      ['-p', `Look at ${SHOT} with the Read tool and describe it.`, '--output-format', 'json', '--allowedTools', 'Read'],
      home,
      {
        HOME: home,
        DISABLE_TELEMETRY: '1',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        ANTHROPIC_BASE_URL: h.gw.url,
        ANTHROPIC_API_KEY: w.key,
        ANTHROPIC_MODEL: 'fake/vision-small',
      },
    );
    const result = (() => {
      try {
        return JSON.parse(run.stdout);
      } catch {
        return { unparsed: run.stdout };
      }
    })();
    assert.equal(
      run.code,
      0,
      `claude exited ${run.code}: ${JSON.stringify({ subtype: result.subtype, result: result.result, errors: result.errors }).slice(0, 800)} ${run.stderr.slice(0, 300)}`,
    );
    assert.equal(result.result, FINAL_TEXT);
    assert.equal(h.fake.received.length, 2);
    const messages = h.fake.received[1]!.body.messages as any[];
    const tool = messages.findIndex((m) => m.role === 'tool');
    assert.ok(tool > 0, 'the tool result went back as a tool message');
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
