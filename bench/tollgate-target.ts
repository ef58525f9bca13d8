import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { GatewayClient } from '../src/gateway-client/gateway-client.ts';
import { adjustBalance } from '../src/ledger/movements.ts';
import { openStorage } from '../src/storage/database.ts';
import { startGatewayProcess, type GatewayProcess } from '../test/support/gateway-process.ts';
import { TEST_ORIGIN } from '../test/support/origin.ts';
import { rowName, type RowCondition } from './rows.ts';
import { MODELS, type Target } from './targets.ts';

/** One or more `tollgate serve` processes on one database, and the funded wallets' keys. */
export interface TollgateDeployment {
  engine: RowCondition['engine'];
  instances: GatewayProcess[];
  /** One header set per funded wallet, each carrying that wallet's own API key. */
  walletHeaders: Array<Record<string, string>>;
  /** A row over the first `wallets` wallets, named by rowName; rows share the processes, so stopping is the deployment's. */
  row(wallets: number): Target & { condition: RowCondition };
  stop(): Promise<void>;
}

/** How many SIWE key creations run at once at start-up: enough to be quick, few enough not to be a load test. */
const KEY_CREATION_CONCURRENCY = 8;

/**
 * Tollgate as an operator runs it (`tollgate serve`), with billing on, a real key per wallet made
 * over SIWE, rate limits set high, info logging (to a pipe the harness drains), and every wallet
 * funded for the whole run. With `redisUrl`, rate limits live in Redis, as several instances on
 * one database need them to.
 */
export async function startTollgate(o: {
  upstreamUrl: string;
  databaseUrl: string;
  instances: number;
  wallets: number;
  redisUrl?: string;
  nodeArgs?: string[];
  /** Variables for the gateway processes beyond the key secret and Redis (a probe's output file). */
  env?: Record<string, string>;
  /** The checkout to run (an A/B runs another tree beside this one); this one by default. */
  root?: string;
}): Promise<TollgateDeployment> {
  const model = (id: string) => ({
    provider: 'bench',
    name: id,
    contextLength: 100_000,
    maxOutputTokens: 4096,
    promptCostPer1M: '0.15',
    completionCostPer1M: '0.6',
  });
  const limits = { chat: { perMinute: 100_000_000, perDay: 1_000_000_000 }, keys: { perMinute: 100_000 }, public: { perMinute: 100_000_000 } };
  // Every instance its own spool folder, as on separate hosts (the default would be ./data/spool in this checkout).
  const spoolRoot = mkdtempSync(join(tmpdir(), 'tollgate-bench-spool-'));
  const config = (i: number) => ({
    database: { url: o.databaseUrl },
    providers: { bench: { baseUrl: o.upstreamUrl, maxConnections: 8192 } },
    models: MODELS.map(model),
    rateLimits: o.redisUrl ? { backend: 'redis', ...limits } : limits,
    ledger: { spoolDir: join(spoolRoot, `instance-${i}`) },
    logging: { level: 'info' },
  });
  // One key secret for all instances: a key made on one must authenticate on the other.
  const env = {
    ...o.env,
    TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex'),
    ...(o.redisUrl ? { TOLLGATE_REDIS_URL: o.redisUrl } : {}),
  };
  const started = await Promise.allSettled(Array.from({ length: o.instances }, (_, i) => startGatewayProcess(config(i), env, o.nodeArgs, o.root)));
  const instances = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stop = async () => {
    await Promise.all(instances.map((g) => g.kill()));
    rmSync(spoolRoot, { recursive: true, force: true });
  };
  try {
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    const walletHeaders = await fundWalletsWithKeys(instances[0]!.url, o.databaseUrl, o.wallets);
    const engine: RowCondition['engine'] = o.databaseUrl.startsWith('sqlite:') ? 'SQLite' : 'PostgreSQL';
    return {
      engine,
      instances,
      walletHeaders,
      row: (wallets) => ({
        name: rowName({ engine, wallets, instances: instances.length }),
        baseUrls: instances.map((g) => `${g.url}/v1`),
        pids: instances.map((g) => g.child.pid!),
        headerSets: walletHeaders.slice(0, wallets),
        condition: { engine, wallets, instances: instances.length },
        // The processes are the deployment's: its own stop ends them, once, for all its rows.
        stop: async () => undefined,
      }),
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Funds `count` new wallets straight in the ledger (as `tollgate admin credit` would) and makes
 * each a key over the public API with a SIWE proof, as a wallet owner would.
 */
async function fundWalletsWithKeys(gatewayUrl: string, databaseUrl: string, count: number): Promise<Array<Record<string, string>>> {
  const wallets = Array.from({ length: count }, () => privateKeyToAccount(generatePrivateKey()));
  const storage = openStorage(databaseUrl, { poolSize: 1 });
  try {
    for (const wallet of wallets) await adjustBalance(storage.db, { wallet: wallet.address, amountUsdc: 1_000_000_000_000, note: 'benchmark funding' });
  } finally {
    await storage.close();
  }
  const headers: Array<Record<string, string>> = new Array(count);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < count; i = next++) {
      // The gateway is reached at 127.0.0.1 and announces its public URL's domain (gateway-process.ts).
      const key = await new GatewayClient(gatewayUrl, wallets[i]!, { siweDomain: new URL(TEST_ORIGIN).host }).createKey('bench');
      headers[i] = { authorization: `Bearer ${key.key}` };
    }
  };
  await Promise.all(Array.from({ length: Math.min(KEY_CREATION_CONCURRENCY, count) }, worker));
  return headers;
}
