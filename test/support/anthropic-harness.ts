import type { Engine } from '../../src/storage/database.ts';
import { startFakeAnthropic, type FakeAnthropic, type FakeAnthropicBehaviour, type FakeAnthropicOptions } from '../../src/fake-providers/fake-anthropic.ts';
import type { FakeBehaviour } from '../../src/fake-providers/fake-openai.ts';
import { MODELS, startChatHarness, type ChatHarness } from './chat-harness.ts';

export const ANTHROPIC_KEY = 'sk-ant-test-provider-key';

/** An Anthropic model priced like chat-small (1 and 2 micro-USDC a token, 20% markup). */
export const CLAUDE = {
  provider: 'anth',
  name: 'claude-test',
  upstreamName: 'claude-upstream',
  contextLength: 100_000,
  maxOutputTokens: 4096,
  promptCostPer1M: '1',
  completionCostPer1M: '2',
  inputs: ['text', 'image'],
  partTokenBounds: { image: 1600 },
};

export interface AnthropicHarness extends ChatHarness {
  anthropic: FakeAnthropic;
}

/**
 * The chat harness with a second provider of `type: anthropic` (provider `anth`) served by the fake
 * Anthropic Messages server, which accepts only ANTHROPIC_KEY.
 */
export async function startAnthropicHarness(
  engine: Engine,
  config: Record<string, unknown> = {},
  provider: Record<string, unknown> = {},
  /** Behaviours chosen per request, for a scripted conversation (a tool call, then the answer). */
  script: { anthropic?: FakeAnthropicOptions['behaviourFor']; openai?: (body: any) => FakeBehaviour | undefined } = {},
): Promise<AnthropicHarness> {
  const anthropic = await startFakeAnthropic({ apiKey: ANTHROPIC_KEY, behaviourFor: script.anthropic });
  const h = await startChatHarness(
    engine,
    {
      models: [...MODELS, CLAUDE],
      ...config,
      providers: {
        anth: { type: 'anthropic', baseUrl: anthropic.url, apiKeyEnv: 'ANTH_KEY', ...provider },
        ...(config.providers as Record<string, unknown> | undefined),
      },
    },
    { env: { ANTH_KEY: ANTHROPIC_KEY }, fakeBehaviourFor: script.openai },
  );
  return {
    ...h,
    anthropic,
    async stop() {
      await h.stop();
      await anthropic.close();
    },
  };
}

/** Both fake providers back to the given behaviours with nothing recorded (a beforeEach). */
export function resetProviders(h: AnthropicHarness, anthropic: FakeAnthropicBehaviour = {}, openai: FakeBehaviour = {}): void {
  h.anthropic.behaviour = anthropic;
  h.fake.behaviour = openai;
  h.anthropic.received.length = 0;
  h.fake.received.length = 0;
}
