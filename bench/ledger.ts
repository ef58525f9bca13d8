import { randomBytes } from 'node:crypto';
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
  o: { seconds: number; concurrency: number; wallets?: number; ledgerWriters?: number },
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
    const started = Date.now();
    const cpu = process.cpuUsage();
    await Promise.all(Array.from({ length: o.concurrency }, (_, n) => worker(n)));
    const used = process.cpuUsage(cpu);
    return { pairsPerSecond: done / ((Date.now() - started) / 1000), cpuMicrosPerPair: (used.user + used.system) / Math.max(1, done) };
  } finally {
    await storage.close();
  }
}

/** measureLedger's pairs per second alone (what `npm run bench` reports). */
export async function ledgerOpsPerSecond(databaseUrl: string, o: { seconds: number; concurrency: number; wallets?: number }): Promise<number> {
  return (await measureLedger(databaseUrl, o)).pairsPerSecond;
}
