import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Sqlite from 'better-sqlite3';
import { newRequestId } from '../src/http/request-id.ts';
import { generateKey, insertKey } from '../src/keys/api-keys.ts';
import { adjustBalance } from '../src/ledger/movements.ts';
import { finishReservation } from '../src/ledger/operations/finish.ts';
import { reserve } from '../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../src/storage/database.ts';
import { migrateToLatest } from '../src/storage/migrate.ts';

export interface LedgerRun {
  /** Reserve + settle pairs committed per second. */
  pairsPerSecond: number;
  /** This process's CPU (user + system) per pair, in µs: the gateway's share of a pair's cost. */
  cpuMicrosPerPair: number;
  /** With a call counter: the database calls per pair (see countSqliteCalls). */
  callsPerPair?: number;
}

/** A funded wallet and its key, as the benchmark's ledger cases drive them. */
export interface Payer {
  wallet: string;
  key: { id: number };
}

/** `count` new wallets, each credited straight in the ledger and given a key. */
export async function fundPayers(storage: Storage, count: number, note: string): Promise<Payer[]> {
  const payers: Payer[] = [];
  for (let i = 0; i < count; i++) {
    const wallet = `0x${randomBytes(20).toString('hex')}`;
    await adjustBalance(storage.db, { wallet, amountUsdc: 1_000_000_000_000, note });
    payers.push({ wallet, key: await insertKey(storage.db, wallet, generateKey(randomBytes(32)), 'bench') });
  }
  return payers;
}

/** One request as the chat route bills it: reserve 100, then finish at 40 with its usage row (two commits). */
export async function reserveAndFinish(storage: Storage, { wallet, key }: Payer, model: string): Promise<void> {
  // The gateway's own request ids (UUIDv7): random ids would spread the inserts over the indexes.
  const requestId = newRequestId();
  if (!(await reserve(storage, { wallet, apiKeyId: key.id, requestId, amountUsdc: 100, leaseMs: 60_000 }))) throw new Error('benchmark wallet ran dry');
  await finishReservation(storage, requestId, 40, {
    requestId,
    apiKeyId: key.id,
    wallet,
    model,
    provider: model.includes('/') ? model.slice(0, model.indexOf('/')) : model,
    promptTokens: 10,
    completionTokens: 20,
    reasoningTokens: 0,
    cachedTokens: 0,
    providerCostUsdc: 30,
    status: 'success',
    latencyMs: 1,
    estimated: false,
  });
}

/**
 * The ledger alone: reserve + settle pairs per second, with `concurrency` requests in flight, on
 * the same code and request ids the chat route uses (two commits per request). `wallets`: how
 * many wallets (each with its own key) the requests are spread over, round robin; 1 is the hot-row
 * worst case the gateway benchmark drives.
 */
export async function measureLedger(
  databaseUrl: string,
  o: { seconds: number; concurrency: number; wallets?: number; ledgerWriters?: number; calls?: () => number; lockstep?: boolean },
): Promise<LedgerRun> {
  // Opened as `tollgate serve` opens it (checkpoints in a worker thread on SQLite).
  const storage = openStorage(databaseUrl, { poolSize: o.concurrency, backgroundCheckpoints: true, ledgerWriters: o.ledgerWriters });
  try {
    await migrateToLatest(storage);
    const payers = await fundPayers(storage, o.wallets ?? 1, 'ledger benchmark');
    const deadline = Date.now() + o.seconds * 1000;
    let done = 0;
    const worker = async (n: number) => {
      for (let turn = n; Date.now() < deadline; turn += o.concurrency) {
        await reserveAndFinish(storage, payers[turn % payers.length]!, 'bench');
        done++;
      }
    };
    // In lockstep: every pair's reserve sent in one turn, then (once all are answered) every finish,
    // so each batch holds `concurrency` units whatever the machine's speed: CPU per pair at a fixed
    // batch size, which a loaded machine moves much less than free-running batches.
    const lockstep = async () => {
      while (Date.now() < deadline) {
        await Promise.all(Array.from({ length: o.concurrency }, (_, n) => reserveAndFinish(storage, payers[n % payers.length]!, 'bench')));
        done += o.concurrency;
      }
    };
    const started = Date.now();
    const callsBefore = o.calls?.() ?? 0;
    const cpu = process.cpuUsage();
    await (o.lockstep ? lockstep() : Promise.all(Array.from({ length: o.concurrency }, (_, n) => worker(n))));
    const used = process.cpuUsage(cpu);
    const run: LedgerRun = { pairsPerSecond: done / ((Date.now() - started) / 1000), cpuMicrosPerPair: (used.user + used.system) / Math.max(1, done) };
    if (o.calls) run.callsPerPair = (o.calls() - callsBefore) / Math.max(1, done);
    return run;
  } finally {
    await storage.close();
  }
}

/** measureLedger's pairs per second alone (what `npm run bench` reports). */
export async function ledgerOpsPerSecond(databaseUrl: string, o: { seconds: number; concurrency: number; wallets?: number }): Promise<number> {
  return (await measureLedger(databaseUrl, o)).pairsPerSecond;
}

/**
 * Counts the driver's calls into SQLite (a statement's run or get, exec for BEGIN and COMMIT) while it
 * is on, by wrapping them on their prototypes: a count per pair that a loaded machine cannot blur.
 */
function countSqliteCalls(): () => number {
  const probe = new Sqlite(':memory:');
  const statement = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<'run' | 'get', (...a: unknown[]) => unknown>;
  const database = Object.getPrototypeOf(probe) as Record<'exec', (...a: unknown[]) => unknown>;
  probe.close();
  let calls = 0;
  for (const [proto, name] of [
    [statement, 'run'],
    [statement, 'get'],
    [database, 'exec'],
  ] as const) {
    const inner = (proto as Record<string, (...a: unknown[]) => unknown>)[name]!;
    (proto as Record<string, unknown>)[name] = function (this: unknown, ...a: unknown[]) {
      calls++;
      return inner.apply(this, a);
    };
  }
  return () => calls;
}

// Usage: node --import tsx bench/ledger.ts [--seconds 8] [--concurrency 32] [--wallets 1] [--count] [--lockstep]
// (SQLite in a scratch directory; --count: SQLite calls per pair, at the wrappers' own small cost; --lockstep: see above).
if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '8' },
      concurrency: { type: 'string', default: '32' },
      wallets: { type: 'string', default: '1' },
      count: { type: 'boolean' },
      lockstep: { type: 'boolean' },
    },
  });
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-ledger-'));
  const calls = values.count ? countSqliteCalls() : null;
  const o = { seconds: Number(values.seconds), concurrency: Number(values.concurrency), wallets: Number(values.wallets), lockstep: values.lockstep };
  const run = await measureLedger(`sqlite:${join(dir, 'ledger.db')}`, { ...o, calls: calls ?? undefined });
  console.log(JSON.stringify({ ...o, ...run }));
  rmSync(dir, { recursive: true, force: true });
}
