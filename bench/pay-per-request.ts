/**
 * What pay-per-request adds before the first token: the paid retry (decode, record, verify,
 * settle, confirm on chain, credit) against a keyed request, on one gateway, one model, one
 * upstream. Part of `npm run bench`; alone: `node --import tsx bench/pay-per-request.ts [--requests N]`.
 *
 * The chain is a local anvil that mines each transaction at once, so the figure is the gateway's
 * own cost plus the RPC round trips; on a public chain add its block time (about 2 s on Base) to
 * the settle, which this flow waits for before it runs the request.
 */
import { Writable } from 'node:stream';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { startAnvil } from '../src/devchain/anvil.ts';
import { deployDevChain, type DevChain, type FundedAccount } from '../src/devchain/deploy.ts';
import { payingGatewayConfig } from './paying-gateway.ts';
import { payPerRequestLines, type PayPerRequestLatency } from './report-sections.ts';
import { startFakeOpenAI } from '../src/fake-providers/fake-openai.ts';
import { createLogger } from '../src/http/logger.ts';
import { generateKey, insertKey } from '../src/keys/api-keys.ts';
import { adjustBalance } from '../src/ledger/movements.ts';
import { startServer, type RunningServer } from '../src/main.ts';
import { join } from 'node:path';

/** Medians and p90s (ms) of each leg, over `requests` sequential requests after 3 warm-up ones. */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;
const stats = (xs: number[]) => ({ median: median(xs), p90: p90(xs) });

/** What a paying benchmark runs against: one in-process gateway on SQLite, anvil with USDC, the instant fake upstream. */
export interface PayingBench {
  chain: DevChain;
  gw: RunningServer;
  /** The chat completions URL and a short JSON request body for it. */
  url: string;
  body: string;
}

/**
 * Starts a PayingBench with pay-per-request on (`payPerRequest` adds to it, e.g. batch settlement),
 * runs `measure` against it, and stops everything whatever happens.
 */
export async function withPayingBench<T>(dir: string, payPerRequest: Record<string, unknown>, measure: (b: PayingBench) => Promise<T>): Promise<T> {
  const anvil = await startAnvil();
  const fake = await startFakeOpenAI({ record: false });
  try {
    const chain = await deployDevChain(anvil);
    const [payTo, relayer] = [await chain.newAccount(), await chain.newAccount()];
    const config = payingGatewayConfig({
      anvil,
      chain,
      dir,
      payTo,
      relayer,
      extra: {
        providers: { fake: { baseUrl: fake.url } },
        models: [{ provider: 'fake', name: 'bench-fast', contextLength: 8000, promptCostPer1M: '1', completionCostPer1M: '2' }],
        payPerRequest: { enabled: true, ...payPerRequest },
        rateLimits: { chat: { perMinute: 1_000_000, perDay: 10_000_000 } },
      },
    });
    const gw = await startServer(config, { logger: createLogger('warn', new Writable({ write: (_c, _e, done) => done() })) });
    try {
      const url = `${gw.url}/v1/chat/completions`;
      const body = JSON.stringify({ model: 'fake/bench-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 });
      return await measure({ chain, gw, url, body });
    } finally {
      await gw.stop();
    }
  } finally {
    await fake.close();
    await anvil.stop();
  }
}

/** The stock client paying `exact` from `payer`'s USDC, at most $1 a request. */
export function exactClient(chain: DevChain, payer: FundedAccount): x402Client {
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: payer });
  client.setSpendControls({ maxAmountPerPayment: '$1', allowedAssets: [{ network: chain.network, asset: chain.usdc, maxAmountPerPayment: '1000000' }] });
  return client;
}

export async function measurePayPerRequest(dir: string, N = 30): Promise<PayPerRequestLatency> {
  return withPayingBench(dir, {}, async ({ chain, gw, url, body }) => {
    const wallet = (await chain.newAccount()).address.toLowerCase();
    await adjustBalance(gw.services.storage.db, { wallet, amountUsdc: 1_000_000 });
    const issued = generateKey(gw.services.keySecret);
    await insertKey(gw.services.storage.db, wallet, issued, 'bench');

    const keyed: number[] = [];
    const offer: number[] = [];
    const paid: number[] = [];
    const client = exactClient(chain, await chain.newAccount({ usdc: 100n * 1_000_000n }));
    // Times each leg the stock client sends: the unpaid request (402) and the paid retry.
    let legs: number[] = [];
    const timed: typeof fetch = async (input, init) => {
      const t = performance.now();
      const res = await fetch(input, init);
      await res.clone().arrayBuffer();
      legs.push(performance.now() - t);
      return res;
    };
    const paying = wrapFetchWithPayment(timed, client);
    for (let i = 0; i < N + 3; i++) {
      const t = performance.now();
      const k = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${issued.key}` }, body });
      await k.arrayBuffer();
      const keyedMs = performance.now() - t;
      legs = [];
      const p = await paying(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await p.arrayBuffer();
      if (k.status !== 200 || p.status !== 200 || legs.length !== 2) throw new Error(`unexpected answers ${k.status} ${p.status} (${legs.length} legs)`);
      if (i < 3) continue; // warm-up
      keyed.push(keyedMs);
      offer.push(legs[0]!);
      paid.push(legs[1]!);
    }
    return { requests: N, keyed: stats(keyed), offer: stats(offer), paid: stats(paid) };
  });
}

// `node --import tsx bench/pay-per-request.ts [--requests N]`: only this section.
if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const { parseArgs } = await import('node:util');
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { values } = parseArgs({ options: { requests: { type: 'string', default: '30' } } });
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-ppr-'));
  try {
    process.stdout.write(`${payPerRequestLines(await measurePayPerRequest(dir, Number(values.requests))).join('\n')}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
