import { Worker } from 'node:worker_threads';
import type { CheckpointCheckOutcome, CheckpointFailPoint } from './checkpoint-check.ts';
import type { CheckpointWorkerInput } from './checkpoint-worker.ts';

const ENTRY = new URL('./worker-entry.mjs', import.meta.url);
// Beside this file: TypeScript when it runs under tsx (the tests, the bench), compiled JavaScript in dist/.
const WORKER_MODULE = new URL(`./checkpoint-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url);

/** A pass ended by stop(): not a failure of the check. */
export class CheckpointPassStopped extends Error {}

export interface CheckpointThread {
  /** One pass's check and store in a new worker thread; rejects when the worker fails, crashes, runs past the deadline or is stopped. */
  check(now: number): Promise<CheckpointCheckOutcome>;
  /** Ends the pass in flight, if any, and waits for its thread to be gone. */
  stop(): Promise<void>;
}

/**
 * The checkpoint pass of a SQLite gateway off its event loop. SQLite's calls are synchronous, so a
 * pass on the serving thread held every request for its whole length (308 ms for a minute at
 * 1,000 req/s); in a worker thread with its own connection to the file (WAL: its reads never block
 * the writer) the loop only starts the pass and receives the outcome.
 *
 * A thread per pass: a pass every minute or so makes its start-up (tens of ms, on the worker's own
 * thread) nothing, and a crashed or hung worker is simply gone by the next pass. A worker that
 * exits without an outcome, or runs past `deadlineMs` (terminated), rejects the pass. Ending the
 * thread mid-store is safe: the store is one transaction, and SQLite rolls back and releases the
 * write lock when the thread's connection goes.
 */
export function checkpointThread(databaseUrl: string, opts: { deadlineMs: number; failPoint?: CheckpointFailPoint | null }): CheckpointThread {
  let running: { worker: Worker; exited: Promise<void> } | null = null;
  let stopping = false;
  return {
    check(now) {
      if (stopping) return Promise.reject(new CheckpointPassStopped('the checkpoint job is stopping'));
      const input: CheckpointWorkerInput = { databaseUrl, now, failPoint: opts.failPoint ?? null };
      const worker = new Worker(ENTRY, { workerData: { module: WORKER_MODULE.href, input } });
      let outcome: CheckpointCheckOutcome | undefined;
      let failure: unknown;
      let overran = false;
      const deadline = setTimeout(() => {
        overran = true;
        void worker.terminate();
      }, opts.deadlineMs);
      worker.once('message', (m: CheckpointCheckOutcome) => (outcome = m));
      worker.once('error', (err) => (failure = err));
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      running = { worker, exited };
      return exited.then(() => {
        clearTimeout(deadline);
        running = null;
        if (outcome) return outcome;
        if (stopping) throw new CheckpointPassStopped('the checkpoint pass was stopped with the gateway');
        if (overran) throw new Error(`the checkpoint worker ran over ${opts.deadlineMs / 1000} s and was stopped; the next pass tries again`);
        throw failure ?? new Error('the checkpoint worker ended without an outcome');
      });
    },
    async stop() {
      stopping = true;
      const r = running;
      if (!r) return;
      await r.worker.terminate();
      await r.exited;
    },
  };
}
