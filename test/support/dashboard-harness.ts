import type { Page } from 'playwright-core';
import { freePort } from '../../src/devchain/ports.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import type { FundedAccount } from '../../src/devchain/deploy.ts';
import type { Engine } from '../../src/storage/database.ts';
import { launchBrowser, ensureDashboardBuilt, type Browser } from './browser.ts';
import { MODELS } from './chat-harness.ts';
import { injectTestWallet, type TestWallet } from './test-wallet.ts';
import { devChain, startTopupHarness, type TopupHarness } from './topup-harness.ts';
import { rpcProxy } from './rpc-proxy.ts';

export const EXPLORER = 'https://explorer.example';

/** Connects the injected test wallet and signs in with it, as a person does: one signature opens the session. */
export async function connectAndSignIn(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Connect Test Wallet' }).click();
  await page.getByRole('button', { name: 'Sign in with your wallet' }).click();
  await page.getByRole('heading', { name: 'Top up' }).waitFor();
}

/**
 * The dashboard's browser tests: a gateway on the dev chain (USDC by EIP-3009, USDT by Permit2) and
 * the fake provider, whose public URL is its real address (the page signs SIWE for it), reaching
 * the chain through a proxy the test can cut (the RPC-down case); and headless chromium.
 */
export interface DashboardHarness {
  h: TopupHarness;
  fake: FakeOpenAI;
  browser: Browser;
  rpc: { up: boolean };
  /** A new page with a test wallet for `account`, the dashboard loaded; CSP violations are collected. */
  open(
    account: FundedAccount,
    opts?: { startChainId?: number; width?: number; height?: number },
  ): Promise<{ page: Page; wallet: TestWallet; problems: string[] }>;
  stop(): Promise<void>;
}

export async function startDashboardHarness(engine: Engine, config: Record<string, unknown> = {}): Promise<DashboardHarness> {
  await ensureDashboardBuilt();
  const { anvil, chain } = await devChain();
  const rpc = { up: true };
  const proxy = await rpcProxy(anvil.rpcUrl, rpc);
  const fake = await startFakeOpenAI();
  const port = await freePort();
  const publicUrl = `http://127.0.0.1:${port}`;
  // What started before a step that fails is stopped: a listener left open keeps the file from ever exiting.
  const stopServers = async () => {
    await fake.close();
    await new Promise((r) => proxy.server.close(r));
  };
  const h = await startTopupHarness(engine, {
    config: {
      server: { port, publicUrl },
      chains: { [String(anvil.chainId)]: { rpcUrl: proxy.url, explorerUrl: EXPLORER } },
      providers: { fake: { baseUrl: fake.url } },
      models: MODELS.filter((m) => m.provider === 'fake'),
      rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
      ...config,
    },
  }).catch(async (err) => {
    await stopServers();
    throw err;
  });
  const browser = await launchBrowser().catch(async (err) => {
    await h.stop();
    await stopServers();
    throw err;
  });
  return {
    h,
    fake,
    browser,
    rpc,
    async open(account, opts = {}) {
      const page = await browser.context.newPage();
      await page.setViewportSize({ width: opts.width ?? 1280, height: opts.height ?? 860 });
      const problems: string[] = [];
      // Script errors and CSP refusals; not the browser's notes on 4xx answers (a 402 is a step of every top-up).
      page.on('console', (m) => {
        if (m.type() === 'error' && !m.text().startsWith('Failed to load resource: the server responded with a status of 4')) problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      const wallet = await injectTestWallet(page, { account, anvil, chain, startChainId: opts.startChainId });
      await page.goto(`${h.gw.url}/`);
      return { page, wallet, problems };
    },
    async stop() {
      await browser.close();
      await h.stop();
      await stopServers();
    },
  };
}
