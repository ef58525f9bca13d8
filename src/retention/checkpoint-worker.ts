import { parentPort, workerData } from 'node:worker_threads';
import { openStorage } from '../storage/database.ts';
import { checkSinceLatestCheckpoint, failPointHooks, type CheckpointFailPoint } from './checkpoint-check.ts';

export interface CheckpointWorkerInput {
  /** `sqlite:<path>`: the worker opens its own connection to the gateway's file. */
  databaseUrl: string;
  now: number;
  failPoint: CheckpointFailPoint | null;
}

/** Runs in the worker thread (checkpoint-thread.ts): one pass's check and store, on a connection of its own; posts the outcome. */
async function main(input: CheckpointWorkerInput): Promise<void> {
  const storage = openStorage(input.databaseUrl);
  try {
    parentPort?.postMessage(await checkSinceLatestCheckpoint(storage.db, { now: input.now, ...failPointHooks(input.failPoint) }));
  } catch (err) {
    throw passableError(err);
  } finally {
    await storage.close();
  }
}

/**
 * The error as the gateway's log should show it. A thread passes on a native Error whole, but the SQLite driver's errors
 * (SqliteError) are not native Errors: it would arrive as its code alone, without the message that says what failed.
 */
function passableError(err: unknown): unknown {
  if (!(err instanceof Error) || Object.prototype.toString.call(err) === '[object Error]') return err;
  const code = (err as { code?: unknown }).code;
  return Object.assign(new Error(err.message), { name: err.name, stack: err.stack, ...(code === undefined ? {} : { code }) });
}

if (parentPort && workerData?.input) await main(workerData.input as CheckpointWorkerInput);
