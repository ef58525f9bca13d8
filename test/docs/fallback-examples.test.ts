import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { docBlock } from '../../scripts/doc-blocks.mjs';
import { parseConfig } from '../../src/config/load.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../../src/fake-providers/fake-anthropic.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { CLOSED_PORT_URL } from '../support/routing-harness.ts';

const run = promisify(execFile);

/**
 * The fallback configuration of README.md and docs/api.md, loaded as written (only the providers'
 * addresses are the fakes'), and the curl example run against it with the primary down.
 */
describe('doc blocks: fallbacks', () => {
  let h: ChatHarness;
  let openrouter: FakeOpenAI;
  let anthropic: FakeAnthropic;
  const config = parse(docBlock('fallback-config')) as { providers: Record<string, Record<string, unknown>>; models: unknown[]; chat: Record<string, unknown> };

  before(async () => {
    openrouter = await startFakeOpenAI();
    anthropic = await startFakeAnthropic();
    h = await startChatHarness(
      'sqlite',
      {
        chat: config.chat,
        providers: {
          // openai is down: nothing listens on its port.
          openai: { ...config.providers.openai, baseUrl: CLOSED_PORT_URL },
          openrouter: { ...config.providers.openrouter, baseUrl: openrouter.url },
          anthropic: { ...config.providers.anthropic, baseUrl: anthropic.url },
        },
        models: config.models,
      },
      { env: { OPENAI_API_KEY: 'sk-openai', OPENROUTER_API_KEY: 'sk-openrouter', ANTHROPIC_API_KEY: 'sk-ant' } },
    );
  });
  after(async () => {
    await h?.gw.assertLedger();
    await h?.stop();
    await openrouter?.close();
    await anthropic?.close();
  });

  test("README's excerpt is a valid configuration whose model has two deployments", () => {
    const readme = parse(docBlock('readme-fallback-config')) as { models: unknown[] };
    const catalog = buildCatalog(
      parseConfig({
        providers: { openai: { baseUrl: 'https://api.openai.com/v1' }, openrouter: { baseUrl: 'https://openrouter.ai/api/v1' } },
        models: readme.models,
      }),
    );
    assert.deepEqual(
      catalog.models[0]!.deployments.map((d) => d.id),
      ['openai/gpt-4o-mini', 'openrouter/openai/gpt-4o-mini'],
    );
  });

  test("docs/api.md's curl: with openai down, openrouter serves and the header says so", async () => {
    const w = await h.wallet(1_000_000);
    const block = docBlock('fallback-curl').replace('http://localhost:8080', h.gw.url).replace('sk-…', w.key);
    const { stdout } = await run('bash', ['-c', `set -eo pipefail\n${block}`]);
    assert.match(stdout, /^x-tollgate-deployment: openrouter\/openai\/gpt-4o-mini\r?$/im);
    assert.equal(openrouter.received[0]!.body.model, 'openai/gpt-4o-mini');
    assert.equal(anthropic.received.length, 0);
  });

  test("docs/api.md's streaming curl: the stream names the deployment that served in its SSE comment", async () => {
    const w = await h.wallet(1_000_000);
    const block = docBlock('fallback-stream-curl').replace('http://localhost:8080', h.gw.url).replace('sk-…', w.key);
    const { stdout } = await run('bash', ['-c', `set -eo pipefail\n${block}`]);
    assert.equal(stdout, ': x-tollgate-deployment openrouter/openai/gpt-4o-mini\n');
  });
});
