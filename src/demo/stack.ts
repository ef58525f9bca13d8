import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../config/load.ts';
import { startAnvil, type Anvil } from '../devchain/anvil.ts';
import { deployDevChain, USDC_DOMAIN, type DevChain, type FundedAccount } from '../devchain/deploy.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../fake-providers/fake-openai.ts';
import { freePort } from '../devchain/ports.ts';
import { createLogger } from '../http/logger.ts';
import { startServer, type RunningServer } from '../main.ts';

/**
 * Everything the demo runs, on 127.0.0.1 only: anvil with real USDC, a fake OpenAI-compatible
 * provider, and a gateway on a throw-away SQLite file that accepts USDC top-ups on that chain.
 */
export interface DemoStack {
  anvil: Anvil;
  chain: DevChain;
  provider: FakeOpenAI;
  gateway: RunningServer;
  /** The wallet the scripted client uses, holding test USDC and gas. */
  wallet: FundedAccount;
  payTo: FundedAccount;
  logFile: string;
}

export const DEMO_MODEL = 'demo-chat';
export const DEMO_EMBEDDING_MODEL = 'demo-embed';
export const DEMO_BLOCK_SECONDS = 1;
/** Old blocks' states the demo's chain keeps on disk: about 17 minutes of blocks, at most a few hundred MB. */
const DEMO_STATES_KEPT = 1_000;

export type StepReporter = (label: string) => { ok(detail?: string): void };

/**
 * What has been started so far, stopped in reverse order. It exists before the first piece starts,
 * so Ctrl-C in the middle of start-up still stops exactly what is running.
 */
export class Teardown {
  private readonly stops: Array<() => Promise<unknown>> = [];
  add(stop: () => Promise<unknown>): void {
    this.stops.push(stop);
  }
  private running: Promise<void> | undefined;
  /** Stops everything; a second call (Ctrl-C during the first) waits for the same run. */
  run(): Promise<void> {
    this.running ??= (async () => {
      for (const stop of this.stops.splice(0).reverse()) await stop().catch(() => undefined);
    })().finally(() => (this.running = undefined));
    return this.running;
  }
}

/** Starts the pieces one by one, reporting each; if one fails, stops what already started. */
export async function startDemoStack(step: StepReporter, teardown: Teardown, opts: { port?: number } = {}): Promise<DemoStack> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-demo-'));
  teardown.add(async () => rmSync(dir, { recursive: true, force: true }));
  try {
    let s = step('local chain: anvil');
    // Blocks every second even when idle, as on a live chain (see startAnvil); the last DEMO_STATES_KEPT blocks' states
    // kept, so a stack left running (--keep) does not fill its temporary folder (anvil writes about 80-300 KB a block).
    const anvil = await startAnvil({ blockTimeSeconds: DEMO_BLOCK_SECONDS, persistedStates: DEMO_STATES_KEPT });
    teardown.add(() => anvil.stop());
    s.ok(anvil.rpcUrl);

    s = step('deploy USDC (Circle FiatTokenV2_2), Permit2, USDT and the x402 batch-settlement contract (a labelled stand-in)');
    const chain = await deployDevChain(anvil);
    const [wallet, payTo, relayer] = [await chain.newAccount({ usdc: 100_000_000n }), await chain.newAccount(), await chain.newAccount()];
    s.ok(`USDC at ${chain.usdc}; test wallet ${wallet.address} holds 100 USDC`);

    s = step('fake OpenAI-compatible provider');
    const provider = await startFakeOpenAI();
    teardown.add(() => provider.close());
    s.ok(provider.url);

    s = step('dashboard bundle');
    const { buildDashboard, dashboardIsStale } = await import('../../scripts/build-dashboard.mjs');
    if (dashboardIsStale()) {
      const { total } = await buildDashboard({ quiet: true });
      s.ok(`built into dist/web (${(total / 1024).toFixed(0)} KB gzipped)`);
    } else s.ok('already built');

    s = step('gateway on SQLite');
    const port = opts.port || (await freePort());
    const publicUrl = `http://127.0.0.1:${port}`;
    const config = parseConfig(
      {
        server: { host: '127.0.0.1', port, publicUrl, shutdownGraceSeconds: 2 },
        metrics: { port: 0 }, // beside a gateway already running on this host
        database: { url: `sqlite:${join(dir, 'tollgate.db')}` },
        providers: { demo: { baseUrl: provider.url } },
        models: [
          { provider: 'demo', name: DEMO_MODEL, contextLength: 128_000, maxOutputTokens: 4096, promptCostPer1M: '0.15', completionCostPer1M: '0.6' },
          { provider: 'demo', name: DEMO_EMBEDDING_MODEL, type: 'embedding', contextLength: 8191, promptCostPer1M: '0.02' },
        ],
        chains: { [String(anvil.chainId)]: { rpcUrl: anvil.rpcUrl } },
        topup: {
          payTo: payTo.address,
          offers: [{ network: chain.network, asset: chain.usdc, transferMethod: 'eip3009', ...USDC_DOMAIN, decimals: 6 }],
          facilitator: { type: 'local' },
        },
        // Keyless requests may pay per request, also through a batch-settlement channel (the channel
        // agent). Its claimer waits its longest period, so the one claim the demo shows is the pass it
        // forces, as `tollgate admin channels --claim` does.
        payPerRequest: { enabled: true, batchSettlement: { enabled: true, withdrawDelaySeconds: 900, minDepositUsd: 1, claimIntervalSeconds: 300 } },
        logging: { level: 'info' },
      },
      { TOLLGATE_RELAYER_KEY: relayer.privateKey },
    );
    const logFile = join(dir, 'gateway.log');
    const logStream = createWriteStream(logFile);
    // The demo, and only the demo, offers its throw-away wallet in the dashboard page.
    const gateway = await startServer(config, {
      logger: createLogger('info', logStream),
      demoWallet: { address: wallet.address, privateKey: wallet.privateKey },
    });
    teardown.add(async () => {
      await gateway.stop(); // within server.shutdownGraceSeconds above
      await new Promise((r) => logStream.end(r));
    });
    s.ok(gateway.url);

    return { anvil, chain, provider, gateway, wallet, payTo, logFile };
  } catch (err) {
    await teardown.run();
    throw err;
  }
}
