import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A process's memory after a forced full collection, as bench/heap-probe.mjs reports it. */
export interface ProbedMemory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  mallocedMemory: number;
  handles: number;
  /** With a snapshot asked for: where it was written. */
  snapshotFile?: string;
}

/** What to start a process with so that it can be probed, and the probe once it runs (pid known). */
export interface HeapProbe {
  nodeArgs: string[];
  env: Record<string, string>;
  measure(pid: number, o?: { snapshot?: boolean }): Promise<ProbedMemory>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PROBE = join(import.meta.dirname, 'heap-probe.mjs');

/** A probe for one process, its files under `dir` named by `name`. Benchmark only: never in an operator's start command. */
export function heapProbe(dir: string, name: string): HeapProbe {
  const out = join(dir, `heap-probe-${name.replace(/[^\w-]/g, '_')}`);
  return {
    nodeArgs: ['--import', PROBE],
    env: { TOLLGATE_HEAP_PROBE_OUT: out },
    async measure(pid, o = {}) {
      rmSync(`${out}.json`, { force: true });
      rmSync(`${out}.heapsnapshot`, { force: true });
      if (o.snapshot) writeFileSync(`${out}.cmd`, 'snapshot');
      process.kill(pid, 'SIGUSR2');
      // A snapshot of a large heap takes seconds; a collection alone, milliseconds.
      for (let i = 0; i < 1200 && !existsSync(`${out}.json`); i++) await sleep(25);
      const memory = JSON.parse(readFileSync(`${out}.json`, 'utf8')) as ProbedMemory;
      return o.snapshot ? { ...memory, snapshotFile: `${out}.heapsnapshot` } : memory;
    },
  };
}
