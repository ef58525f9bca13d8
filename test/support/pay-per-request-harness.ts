import { after, before } from 'node:test';
import OpenAI from 'openai';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { USDC_DOMAIN, type FundedAccount } from '../../src/devchain/deploy.ts';
import { signEip3009, type Eip3009Terms } from './x402-payloads.ts';
import type { Engine } from '../../src/storage/database.ts';
import { contextLengthsOf, MODELS } from './chat-harness.ts';
import { call, mergeConfig } from './gateway.ts';
import { startTopupHarness, type TopupHarness } from './topup-harness.ts';

/**
 * A gateway with pay-per-request on, its top-up offers on the shared dev chain, and the fake
 * provider behind it (prices of chat-harness.ts: 1 and 2 micro-USDC a token, 20% markup).
 */
export interface PayPerRequestHarness extends TopupHarness {
  fake: FakeOpenAI;
  /**
   * The stock `openai` SDK paying with the stock `@x402/fetch` client of `account`: no API key
   * (the SDK's Authorization header is removed, so the gateway answers 402 and the client pays).
   */
  openai(account: FundedAccount, method?: 'eip3009' | 'permit2'): OpenAI;
  chat(body: unknown, headers?: Record<string, string>): ReturnType<typeof call>;
  /** A USDC (EIP-3009) authorization signed by hand from `payer` to payTo, for payloads stock clients never send. */
  usdcPayment(payer: FundedAccount, value: bigint, over?: Partial<Eip3009Terms>): ReturnType<typeof signEip3009>;
}

export async function startPayPerRequestHarness(
  engine: Engine,
  opts: { config?: Record<string, unknown>; env?: NodeJS.ProcessEnv } = {},
): Promise<PayPerRequestHarness> {
  const fake = await startFakeOpenAI({ contextLengths: contextLengthsOf(MODELS) });
  const config = mergeConfig(
    {
      providers: { fake: { baseUrl: fake.url }, other: { baseUrl: fake.url } },
      models: MODELS,
      payPerRequest: { enabled: true },
      rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
    },
    opts.config ?? {},
  );
  // A gateway that fails to start (a port taken) must not leave the fake listening: the file would then never exit
  // and sit until the runner's timeout with its other tests cancelled.
  const h = await startTopupHarness(engine, { config, env: opts.env }).catch(async (err) => {
    await fake.close();
    throw err;
  });
  return {
    ...h,
    fake,
    openai: (account, method) =>
      new OpenAI({
        baseURL: `${h.gw.url}/v1`,
        apiKey: 'unused',
        defaultHeaders: { Authorization: null },
        fetch: h.payingFetch(account, method),
        maxRetries: 0,
      }),
    chat: (body, headers = {}) => call(h.gw.url, 'POST', '/v1/chat/completions', body, headers),
    usdcPayment: (payer, value, over = {}) =>
      signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value, ...over }),
    async stop() {
      await h.stop();
      await fake.close();
    },
  };
}

/**
 * A harness for the suite being declared: started before its tests, its ledger checked and stopped
 * after them. The returned function gives the running harness inside tests.
 */
export function payPerRequestSuite(engine: Engine, opts: Parameters<typeof startPayPerRequestHarness>[1] = {}): () => PayPerRequestHarness {
  let h: PayPerRequestHarness | undefined;
  before(async () => {
    h = await startPayPerRequestHarness(engine, opts);
  });
  after(async () => {
    await h?.gw.assertLedger();
    await h?.stop();
  });
  return () => {
    if (!h) throw new Error('the pay-per-request harness is not started yet (use it inside a test)');
    return h;
  };
}
