import { after, afterEach, before, beforeEach } from 'node:test';
import OpenAI from 'openai';
import type { PrivateKeyAccount } from 'viem/accounts';
import { getBalance } from '../../src/ledger/balances.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import type { Engine } from '../../src/storage/database.ts';
import { startFakeOpenAI, type FakeBehaviour, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { call, mergeConfig, startTestGateway, type TestGateway } from './gateway.ts';
import { newAccount, createKeyProof } from './siwe.ts';

/** The fake provider refuses prompts over these windows, as real providers do. */
export const contextLengthsOf = (models: { name: string; contextLength: number }[]) => Object.fromEntries(models.map((m) => [m.name, m.contextLength]));

/** Prices chosen so that every charge is easy to compute by hand: 1 and 2 micro-USDC a token, 20% markup. */
export const MODELS = [
  { provider: 'fake', name: 'chat-small', contextLength: 100_000, maxOutputTokens: 4096, promptCostPer1M: '1', completionCostPer1M: '2' },
  { provider: 'fake', name: 'shared-name', contextLength: 8000, promptCostPer1M: '1', completionCostPer1M: '1' },
  { provider: 'other', name: 'shared-name', contextLength: 8000, promptCostPer1M: '1', completionCostPer1M: '1' },
  { provider: 'fake', name: 'thinker', contextLength: 8000, promptCostPer1M: '1', completionCostPer1M: '1', reasoningFamily: 'thinking' },
  { provider: 'fake', name: 'effort', contextLength: 8000, promptCostPer1M: '1', completionCostPer1M: '1', reasoningFamily: 'effort' },
];
const CONTEXT_LENGTHS = contextLengthsOf(MODELS);

export interface ChatHarness {
  fake: FakeOpenAI;
  gw: TestGateway;
  /** A new wallet funded with `usdc` micro-USDC and an API key. */
  wallet(usdc: number): Promise<{ account: PrivateKeyAccount; key: string; keyId: number }>;
  client(key: string): OpenAI;
  balance(account: PrivateKeyAccount): Promise<{ balance_usdc: number; locked_usdc: number }>;
  stop(): Promise<void>;
}

export async function startChatHarness(
  engine: Engine,
  config: Record<string, unknown> = {},
  /** `fakeProvider`: keys merged into the `fake` provider's config (e.g. maxConnections). */
  /** `fakeBehaviourFor`: the fake provider's behaviour chosen per request (a scripted conversation). */
  extra: {
    env?: NodeJS.ProcessEnv;
    databaseUrl?: string;
    fakeProvider?: Record<string, unknown>;
    now?: () => number;
    fakeBehaviourFor?: (body: any) => FakeBehaviour | undefined;
  } = {},
): Promise<ChatHarness> {
  const fake = await startFakeOpenAI({ contextLengths: CONTEXT_LENGTHS, behaviourFor: extra.fakeBehaviourFor });
  const gw = await startTestGateway({
    engine,
    // The fake provider needs no key, but it is configured with one (as a real provider is) and the
    // gateway refuses a provider whose key variable is unset.
    env: { FAKE_KEY: 'sk-fake-provider-key', ...extra.env },
    databaseUrl: extra.databaseUrl,
    now: extra.now,
    // Merged deeply, so a test can add a key to a provider (extraFields) without repeating its URL.
    config: mergeConfig(
      {
        providers: { fake: { baseUrl: fake.url, apiKeyEnv: 'FAKE_KEY', ...extra.fakeProvider }, other: { baseUrl: fake.url } },
        models: MODELS,
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 }, keys: { perMinute: 100_000 }, public: { perMinute: 100_000 } },
      },
      config,
    ),
  });
  return {
    fake,
    gw,
    async wallet(usdc) {
      const account = newAccount();
      if (usdc > 0) {
        await adjustBalance(gw.services.storage.db, { wallet: account.address, amountUsdc: usdc, note: 'test funding' });
      }
      const res = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
      if (res.status !== 201) throw new Error(`key creation failed: ${res.text}`);
      return { account, key: res.body.key, keyId: res.body.id };
    },
    client: (key) => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 }),
    balance: (account) => getBalance(gw.services.storage.db, account.address),
    async stop() {
      await gw.stop();
      await fake.close();
    },
  };
}

/** Reads a raw SSE response into its `data:` payloads. */
export async function readSse(res: Response): Promise<string[]> {
  const text = await res.text();
  return text
    .split('\n\n')
    .filter((block) => block.startsWith('data: '))
    .map((block) => block.slice(6));
}

/**
 * Inside a describe: a SQLite chat harness for client tests, its fake provider reset to `behaviour`
 * (and its recorded requests cleared) before each test, the ledger checked after each. Returns a
 * getter, since the harness exists only once `before` has run.
 */
export function clientSuite(behaviour: FakeBehaviour): () => ChatHarness {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  beforeEach(() => {
    h.fake.behaviour = { ...behaviour };
    h.fake.received.length = 0;
  });
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());
  return () => h;
}
