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
  } finally {
    await storage.close();
  }
}

if (parentPort && workerData?.input) await main(workerData.input as CheckpointWorkerInput);
