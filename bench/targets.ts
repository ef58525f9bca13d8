import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { privateKeyToAccount, generatePrivateKey } from 'viem/accounts';
import { stopChild, track, waitForOutput } from '../src/devchain/processes.ts';
import { freePort } from '../src/devchain/ports.ts';
import { adjustBalance } from '../src/ledger/credits.ts';
import { openStorage } from '../src/storage/database.ts';
import { GatewayClient } from '../src/gateway-client/gateway-client.ts';
import { startGatewayProcess } from '../test/support/gateway-process.ts';

/** One thing the benchmark sends requests to: its base URL (…/v1), its process, its headers. */
export interface Target {
  name: string;
  baseUrl: string;
  /** The process whose CPU and memory are measured (the upstream itself for "direct"). */
  pid: number;
  headers: Record<string, string>;
  stop(): Promise<void>;
}

const ROOT = join(import.meta.dirname, '..');
export const MODELS = ['bench-fast', 'bench-paced', 'bench-slow'];

/** Starts a Node child that prints a line matching `ready` when it listens. */
async function launch(name: string, args: string[], ready: RegExp, env: NodeJS.ProcessEnv = {}): Promise<{ child: ChildProcess; match: RegExpMatchArray }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  const match = await waitForOutput(child, ready, name, 60_000);
  // Keep draining: a process blocked on a full stdout pipe would measure as slow.
  child.stdout?.resume();
  child.stderr?.resume();
  return { child, match };
}

const stopper = (child: ChildProcess) => () => stopChild(child);

export async function startUpstream(): Promise<{ url: string; pid: number; stop(): Promise<void> }> {
  const { child, match } = await launch('upstream', ['--import', 'tsx', 'bench/upstream.ts'], /"url":"(http:\/\/127\.0\.0\.1:\d+\/v1)"/);
  return { url: match[1]!, pid: child.pid!, stop: stopper(child) };
}

export function directTarget(upstream: { url: string; pid: number }): Target {
  return { name: 'upstream direct', baseUrl: upstream.url, pid: upstream.pid, headers: { authorization: 'Bearer sk-bench' }, stop: async () => undefined };
}

export async function referenceProxy(upstreamUrl: string): Promise<Target> {
  const { child, match } = await launch('reference proxy', ['--import', 'tsx', 'bench/reference-proxy.ts', upstreamUrl], /"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
  return { name: 'node:http+undici proxy', baseUrl: `${match[1]}/v1`, pid: child.pid!, headers: { authorization: 'Bearer sk-bench' }, stop: stopper(child) };
}

export async function portkey(upstreamUrl: string): Promise<Target> {
  const port = await freePort();
  const { child } = await launch(
    'Portkey gateway',
    ['--import', './bench/loopback-only.mjs', 'bench/node_modules/@portkey-ai/gateway/build/start-server.js', `--port=${port}`, '--headless'],
    /Ready for connections/,
    { NODE_ENV: 'production' },
  );
  return {
    name: 'Portkey gateway',
    baseUrl: `http://127.0.0.1:${port}/v1`,
    pid: child.pid!,
    headers: { authorization: 'Bearer sk-bench', 'x-portkey-provider': 'openai', 'x-portkey-custom-host': upstreamUrl },
    stop: stopper(child),
  };
}

/**
 * Tollgate as an operator runs it (`tollgate serve`), with billing on, a real key, rate limits set
 * high, info logging (to a pipe the harness drains), and a wallet funded for the whole run.
 */
export async function tollgate(name: string, upstreamUrl: string, databaseUrl: string): Promise<Target> {
  const model = (id: string) => ({ provider: 'bench', name: id, contextLength: 100_000, maxOutputTokens: 4096, promptCostPer1M: '0.15', completionCostPer1M: '0.6' });
  const gateway = await startGatewayProcess(
    {
      database: { url: databaseUrl },
      providers: { bench: { baseUrl: upstreamUrl, maxConnections: 8192 } },
      models: MODELS.map(model),
      rateLimits: { chat: { perMinute: 100_000_000, perDay: 1_000_000_000 }, keys: { perMinute: 100_000 }, public: { perMinute: 100_000_000 } },
      logging: { level: 'info' },
    },
    { TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') },
  );
  const url = gateway.url;
  const wallet = privateKeyToAccount(generatePrivateKey());
  // Funding goes straight into the ledger (as `tollgate admin credit` would); the key is made over
  // the public API with a SIWE proof, like any wallet owner would.
  const storage = openStorage(databaseUrl, { poolSize: 1 });
  try {
    await adjustBalance(storage.db, { wallet: wallet.address, amountUsdc: 1_000_000_000_000, note: 'benchmark funding' });
  } finally {
    await storage.close();
  }
  const key = await new GatewayClient(url, wallet).createKey('bench');
  return { name, baseUrl: `${url}/v1`, pid: gateway.child.pid!, headers: { authorization: `Bearer ${key.key}` }, stop: gateway.kill };
}
