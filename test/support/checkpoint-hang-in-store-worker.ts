// A checkpoint worker module for test/ledger/review-checkpoint-worker-thread.test.ts: one pass as checkpoint-worker.ts runs
// it, that stops inside the store's transaction (the sums added, the write lock held) and tells the test so, then waits to
// be terminated, as a pass ended at its deadline or by the gateway's stop() while storing would be.
import { parentPort, workerData } from 'node:worker_threads';
import { checkSinceLatestCheckpoint } from '../../src/retention/checkpoint-check.ts';
import { openStorage } from '../../src/storage/database.ts';

const { databaseUrl, now } = workerData.input as { databaseUrl: string; now: number };
const storage = openStorage(databaseUrl);
await checkSinceLatestCheckpoint(storage.db, {
  now,
  beforeCommit: () => {
    parentPort?.postMessage('in-store');
    return new Promise<void>(() => setInterval(() => undefined, 60_000));
  },
});
