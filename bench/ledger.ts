import { randomBytes } from 'node:crypto';
import { newRequestId } from '../src/http/request-id.ts';
import { generateKey, insertKey } from '../src/keys/api-keys.ts';
import { adjustBalance } from '../src/ledger/credits.ts';
import { finishReservation } from '../src/ledger/operations/finish.ts';
import { reserve } from '../src/ledger/operations/reserve.ts';
import { openStorage } from '../src/storage/database.ts';
import { migrateToLatest } from '../src/storage/migrate.ts';

/**
 * The ledger alone: reserve + settle pairs per second, with `concurrency` requests in flight, on
 * the same code and request ids the chat route uses (two commits per request).
 */
export async function ledgerOpsPerSecond(databaseUrl: string, o: { seconds: number; concurrency: number }): Promise<number> {
  // Opened as `tollgate serve` opens it (checkpoints in a worker thread on SQLite).
  const storage = openStorage(databaseUrl, { poolSize: o.concurrency, backgroundCheckpoints: true });
  try {
    await migrateToLatest(storage);
    const wallet = `0x${randomBytes(20).toString('hex')}`;
    await adjustBalance(storage.db, { wallet, amountUsdc: 1_000_000_000_000, note: 'ledger benchmark' });
    const key = await insertKey(storage.db, wallet, generateKey(randomBytes(32)), 'bench');
    const deadline = Date.now() + o.seconds * 1000;
    let done = 0;
    const worker = async () => {
      while (Date.now() < deadline) {
        // The gateway's own request ids (UUIDv7): random ids would spread the inserts over the indexes.
        const requestId = newRequestId();
        if (!(await reserve(storage, { wallet, apiKeyId: key.id, requestId, amountUsdc: 100, leaseMs: 60_000 }))) throw new Error('benchmark wallet ran dry');
        await finishReservation(storage, requestId, 40, {
          requestId, apiKeyId: key.id, wallet, model: 'bench', provider: 'bench', promptTokens: 10, completionTokens: 20,
          reasoningTokens: 0, cachedTokens: 0, providerCostUsdc: 30, status: 'success', latencyMs: 1, estimated: false,
        });
        done++;
      }
    };
    const started = Date.now();
    await Promise.all(Array.from({ length: o.concurrency }, worker));
    return done / ((Date.now() - started) / 1000);
  } finally {
    await storage.close();
  }
}
