import { after, afterEach, before, beforeEach } from 'node:test';
import { startFakeOpenAI, type FakeBehaviour, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import type { Engine } from '../../src/storage/database.ts';
import { CLAUDE, startAnthropicHarness, type AnthropicHarness } from './anthropic-harness.ts';
import { MODELS } from './chat-harness.ts';
import { mergeConfig } from './gateway.ts';

/** A port nothing listens on: connections are refused at once. */
export const CLOSED_PORT_URL = 'http://127.0.0.1:9/v1';

/**
 * Models with fallbacks over three fake providers on their own ports: `fake` (OpenAI-compatible, the
 * usual primary), `backup` (a second OpenAI-compatible server, cheaper to us), `anth` (Anthropic),
 * `dead` (a closed port) and `nokey` (its key variable unset). Listed prices as chat-small's (1.2 and 2.4 micro-USDC a token billed);
 * the backup costs us 0.5 and 1, the primary 1 and 2, so a request's revenue says who served.
 */
export const ROUTED_MODELS = [
  {
    provider: 'fake',
    name: 'routed',
    contextLength: 100_000,
    maxOutputTokens: 4096,
    promptCostPer1M: '1',
    completionCostPer1M: '2',
    fallbacks: [{ provider: 'backup', upstreamName: 'routed-backup', promptCostPer1M: '0.5', completionCostPer1M: '1' }],
  },
  {
    provider: 'dead',
    name: 'refused',
    contextLength: 100_000,
    maxOutputTokens: 4096,
    promptCostPer1M: '1',
    completionCostPer1M: '2',
    fallbacks: [{ provider: 'backup', upstreamName: 'refused-backup', promptCostPer1M: '0.5', completionCostPer1M: '1' }],
  },
  {
    provider: 'fake',
    name: 'to-claude',
    contextLength: 100_000,
    maxOutputTokens: 4096,
    promptCostPer1M: '1',
    completionCostPer1M: '2',
    fallbacks: [{ provider: 'anth', upstreamName: 'claude-fallback', promptCostPer1M: '0.5', completionCostPer1M: '1' }],
  },
  {
    ...CLAUDE,
    name: 'claude-routed',
    upstreamName: 'claude-primary',
    fallbacks: [{ provider: 'fake', upstreamName: 'gpt-fallback', promptCostPer1M: '0.5', completionCostPer1M: '1' }],
  },
  {
    provider: 'nokey',
    name: 'keyless',
    contextLength: 100_000,
    maxOutputTokens: 4096,
    promptCostPer1M: '1',
    completionCostPer1M: '2',
    fallbacks: [{ provider: 'backup', upstreamName: 'keyless-backup', promptCostPer1M: '0.5', completionCostPer1M: '1' }],
  },
  {
    provider: 'fake',
    name: 'embed-routed',
    type: 'embedding',
    contextLength: 8192,
    promptCostPer1M: '1',
    fallbacks: [{ provider: 'backup', upstreamName: 'embed-backup', promptCostPer1M: '0.5' }],
  },
  {
    provider: 'fake',
    name: 'weighted',
    contextLength: 100_000,
    maxOutputTokens: 4096,
    promptCostPer1M: '1',
    completionCostPer1M: '2',
    weight: 3,
    fallbacks: [{ provider: 'backup', upstreamName: 'weighted-backup', weight: 1 }],
  },
];

export interface RoutingHarness extends AnthropicHarness {
  backup: FakeOpenAI;
}

export async function startRoutingHarness(engine: Engine, config: Record<string, unknown> = {}): Promise<RoutingHarness> {
  const backup = await startFakeOpenAI();
  const h = await startAnthropicHarness(
    engine,
    mergeConfig(
      {
        // High enough that only the cooldown tests (which lower it) see one.
        chat: { firstByteTimeoutSeconds: 1, cooldown: { failures: 1000 } },
        // `nokey` names a key variable nobody set: its deployments are passed over.
        providers: {
          backup: { baseUrl: backup.url },
          dead: { baseUrl: CLOSED_PORT_URL },
          nokey: { baseUrl: CLOSED_PORT_URL, apiKeyEnv: 'TOLLGATE_TEST_UNSET_KEY' },
        },
        models: [...MODELS, CLAUDE, ...ROUTED_MODELS],
      },
      config,
    ),
  );
  return {
    ...h,
    backup,
    async stop() {
      await h.stop();
      await backup.close();
    },
  };
}

/** Every provider back to answering `usage`, nothing recorded. */
export function resetRouting(h: RoutingHarness, openai: FakeBehaviour = {}): void {
  for (const fake of [h.fake, h.backup]) {
    fake.behaviour = { ...openai };
    fake.received.length = 0;
  }
  h.anthropic.behaviour = {};
  h.anthropic.received.length = 0;
}

/**
 * Inside a describe: a routing harness on `engine`, every provider reset to answer `usage` before
 * each test, the ledger checked after each. Returns a getter (the harness exists once `before` ran).
 */
export function routingSuite(engine: Engine, usage: FakeBehaviour['usage'], config: Record<string, unknown> = {}): () => RoutingHarness {
  let h: RoutingHarness;
  before(async () => {
    h = await startRoutingHarness(engine, config);
  });
  beforeEach(() => resetRouting(h, { usage }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());
  return () => h;
}

/** A chat completion request with an API key, as sent by a client (`signal` to leave early). */
export const postChat = (h: RoutingHarness, key: string, body: Record<string, unknown>, signal?: AbortSignal) =>
  fetch(`${h.gw.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
