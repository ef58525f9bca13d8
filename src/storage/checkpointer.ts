import { Worker } from 'node:worker_threads';

/**
 * Background WAL checkpoints for the SQLite file. SQLite's automatic checkpoint runs inside the
 * COMMIT that crosses the threshold, on the event loop: copying a thousand pages and syncing the
 * database file stalled every request in flight, and cost about a quarter of the ledger's
 * throughput. A worker thread with its own connection does that copy continuously instead, so when
 * the automatic checkpoint does come due, there is almost nothing left for it to copy.
 */
export interface Checkpointer {
  stop(): Promise<void>;
}

export function startCheckpointer(file: string, intervalMs = 100): Checkpointer {
  const worker = new Worker(new URL('./checkpoint-worker.mjs', import.meta.url), { workerData: { file, intervalMs } });
  // A checkpointer that dies only costs speed: SQLite's own checkpoint still runs.
  worker.on('error', () => undefined);
  worker.unref();
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    stop: async () => {
      // Held again while stopping, or an otherwise idle process would exit before the worker does.
      worker.ref();
      worker.postMessage('stop');
      await exited;
    },
  };
}
