import type { Config, ModelConfig } from '../config/schema.ts';
import { KNOWN_CHAINS } from '../chain/known-chains.ts';
import { startFakeAnthropic } from './fake-anthropic.ts';
import { startFakeOpenAI } from './fake-openai.ts';

/**
 * `tollgate serve --fake-providers`: the test suite's fake OpenAI and Anthropic servers, started on
 * 127.0.0.1 beside the gateway, so that a newcomer with no provider account reaches a first billed
 * chat on their own gateway. Everything about it says what it is: the provider and model names
 * (fake/canned-chat), every answer's text, and a warning at start. It is a command-line flag only,
 * never a config key, so that no configuration file can carry it into production, and it refuses
 * to start where money that is worth something could buy its canned answers (see refusal below).
 */

export const FAKE_OPENAI_PROVIDER = 'fake';
export const FAKE_ANTHROPIC_PROVIDER = 'fake-anthropic';

export const CANNED_ANSWER =
  "This is a canned answer from Tollgate's built-in fake provider (tollgate serve --fake-providers): no language model was called. " +
  'It is billed like a real answer, so your balance, usage and ledger move as they would.';

// Priced like gpt-4o-mini, so the charges look like a real small model's.
const PRICES = { promptCostPer1M: '0.15', completionCostPer1M: '0.6' } as const;

export const FAKE_MODELS: readonly ModelConfig[] = [
  {
    type: 'chat',
    provider: FAKE_OPENAI_PROVIDER,
    name: 'canned-chat',
    contextLength: 128_000,
    maxOutputTokens: 4096,
    reasoningFamily: 'none',
    created: 1735689600,
    ...PRICES,
  },
  {
    type: 'chat',
    provider: FAKE_ANTHROPIC_PROVIDER,
    name: 'canned-claude',
    contextLength: 200_000,
    maxOutputTokens: 4096,
    reasoningFamily: 'none',
    created: 1735689600,
    ...PRICES,
  },
  {
    type: 'embedding',
    provider: FAKE_OPENAI_PROVIDER,
    name: 'canned-embedding',
    contextLength: 8191,
    maxOutputTokens: 1,
    reasoningFamily: 'none',
    created: 1735689600,
    promptCostPer1M: '0.02',
  },
];

/** A refusal of --fake-providers, saying what the flag is for and `why` it may not run here. */
export const refuse = (why: string) => `--fake-providers serves canned answers, not a model's, so it is for trying Tollgate on your own machine: ${why}`;

/** Why the fake providers may not run with this configuration, or null when they may. */
export function fakeProvidersRefusal(config: Pick<Config, 'providers' | 'topup'>, env: NodeJS.ProcessEnv): string | null {
  if (env.NODE_ENV === 'production') return refuse('NODE_ENV is production; unset it, or run without --fake-providers');
  const paid = config.topup.offers.filter((o) => !KNOWN_CHAINS[Number(o.network.split(':')[1])]?.testnet).map((o) => o.network);
  if (paid.length > 0) {
    return refuse(
      `topup.offers accepts stablecoins on ${[...new Set(paid)].join(', ')}, not a known test or local chain, so real money could buy canned answers; remove those offers or run without --fake-providers`,
    );
  }
  const taken = [FAKE_OPENAI_PROVIDER, FAKE_ANTHROPIC_PROVIDER].filter((p) => config.providers[p]);
  if (taken.length > 0) return refuse(`the configuration already has a provider named ${taken.join(' and ')}; rename it, or run without --fake-providers`);
  return null;
}

export interface BuiltInFakes {
  /** The configuration with the fake providers and their models added after the configured ones. */
  config: Config;
  /** One line for the operator: what runs, where, and that it is not a model. */
  banner: string;
  stop(): Promise<void>;
}

/** Starts both fakes (recording nothing: they run as long as the gateway) and adds them to `config`. */
export async function startBuiltInFakes(config: Config): Promise<BuiltInFakes> {
  const [openai, anthropic] = await Promise.all([
    startFakeOpenAI({ record: false, behaviour: { content: CANNED_ANSWER } }),
    startFakeAnthropic({ record: false, behaviour: { content: CANNED_ANSWER } }),
  ]);
  const providers: Config['providers'] = {
    ...config.providers,
    [FAKE_OPENAI_PROVIDER]: { type: 'openai-compatible', baseUrl: openai.url, maxConnections: 64 },
    // Anthropic's wire format names a key in every request; the fake takes any, so it gets a fixed one.
    [FAKE_ANTHROPIC_PROVIDER]: {
      type: 'anthropic',
      baseUrl: anthropic.url,
      apiKeyEnv: 'TOLLGATE_FAKE_ANTHROPIC_KEY',
      maxConnections: 64,
      anthropicVersion: '2023-06-01',
      anthropicBeta: [],
    },
  };
  const ids = FAKE_MODELS.map((m) => `${m.provider}/${m.name}`);
  return {
    config: {
      ...config,
      providers,
      models: [...config.models, ...FAKE_MODELS],
      secrets: { ...config.secrets, providerKeys: { ...config.secrets.providerKeys, [FAKE_ANTHROPIC_PROVIDER]: 'fake-provider-key' } },
    },
    banner:
      `tollgate: --fake-providers: built-in fake providers on ${openai.url} and ${anthropic.url} serve ${ids.join(', ')}. ` +
      'Their answers are canned (no model is called) and billed like real ones. For trying Tollgate only; never in production.\n',
    stop: async () => {
      await Promise.all([openai.close(), anthropic.close()]);
    },
  };
}
