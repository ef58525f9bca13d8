import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What a benchmark script's body gets: a folder of its own, and a place to register what to stop. */
export interface ScriptScope {
  dir: string;
  /** Registers a stop; stops run in reverse order at the end, on a failure, on Ctrl-C and on SIGTERM. */
  onStop(stop: () => Promise<unknown>): void;
}

/**
 * Runs a benchmark script (`npm run bench`, bench/profile.ts, bench/open-loop-check.ts) so that
 * every process it started is stopped and its folder removed however it ends, then exits: the
 * servers' handles would otherwise keep Node alive.
 */
export async function runScript(name: string, body: (scope: ScriptScope) => Promise<void>): Promise<never> {
  const dir = mkdtempSync(join(tmpdir(), `tollgate-${name}-`));
  const stops: Array<() => Promise<unknown>> = [];
  const stopAll = async () => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  process.once('SIGTERM', () => void stopAll().then(() => process.exit(143)));
  try {
    await body({ dir, onStop: (stop) => void stops.push(stop) });
  } catch (err) {
    process.stderr.write(`${name} failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  } finally {
    await stopAll();
  }
  process.exit();
}
