// The ledger checkpoint pass and the SQLite gateway's event loop: one pass of the checkpoint job over
// a period's requests (a minute at 1,000 req/s, through the ledger's own reserve and finish), run on
// the event loop and then in the checkpoint worker (src/retention/checkpoint-thread.ts), each while
// a request goes through the ledger every 5 ms beside it. Prints, for each: the pass's wall time, the
// event loop's delay (perf_hooks monitorEventLoopDelay: max and p99), the slowest of those requests,
// and the most CPU time the main thread spent in one turn (its own, from Linux's per-thread
// statistics: on a loaded machine wall times are stretched by the scheduler). bench/README.md, "The checkpoint pass off the event loop".
//   node --import tsx bench/checkpoint-loop.ts [requests]      default 60000
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { runCheckpointPass } from '../src/retention/checkpoint-job.ts';
import { checkpointThread } from '../src/retention/checkpoint-thread.ts';
import { openStorage, type Storage } from '../src/storage/database.ts';
import { migrateToLatest } from '../src/storage/migrate.ts';
import { threadCpuMs, watchTurns } from '../test/support/loop-hold.ts';
import { fundPayers, type Payer, reserveAndFinish } from './ledger.ts';

const requests = Number(process.argv[2] ?? 60_000);
const PERIOD_MS = 60_000;

/** `n` requests through the ledger, 32 in flight. */
async function drive(s: Storage, payers: Payer[], n: number): Promise<void> {
  let next = 0;
  const one = async () => {
    while (next < n) await reserveAndFinish(s, payers[next++ % payers.length]!, 'openai/gpt-4o-mini');
  };
  await Promise.all(Array.from({ length: 32 }, one));
}

/** `pass` timed, with the loop's delay and a request every 5 ms beside it. */
async function measure(s: Storage, payers: Payer[], pass: () => Promise<unknown>) {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  await sleep(20); // the histogram's first sample only starts its clock
  const latencies: number[] = [];
  let passing = true;
  const beside = (async () => {
    for (let i = 0; passing; i++) {
      const started = performance.now();
      await reserveAndFinish(s, payers[i % payers.length]!, 'openai/gpt-4o-mini');
      latencies.push(performance.now() - started);
      await sleep(5);
    }
  })();
  const turns = watchTurns(threadCpuMs);
  const started = performance.now();
  await pass();
  const passMs = performance.now() - started;
  const longestTurnCpuMs = Math.round(turns.stop() * 10) / 10;
  passing = false;
  await beside;
  await sleep(5);
  delay.disable();
  const ms = (ns: number) => Math.round(ns / 1e5) / 10;
  return {
    passMs: Math.round(passMs),
    loopDelayMaxMs: ms(delay.max),
    loopDelayP99Ms: ms(delay.percentile(99)),
    slowestRequestMs: Math.round(Math.max(...latencies)),
    longestTurnCpuMs,
  };
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-checkpoint-'));
const url = `sqlite:${join(dir, 'tollgate.db')}`;
const s = openStorage(url, { backgroundCheckpoints: true });
try {
  await migrateToLatest(s);
  const payers = await fundPayers(s, 100, 'benchmark funding');
  let now = Date.now();
  const pass = (check?: (now: number) => Promise<unknown>) => () =>
    runCheckpointPass(s, { now: (now += PERIOD_MS), holder: 'bench', periodMs: PERIOD_MS, check: check as never });
  await pass()();
  await drive(s, payers, requests);
  const onLoop = await measure(s, payers, pass());
  await drive(s, payers, requests);
  const inWorker = await measure(s, payers, pass(checkpointThread(url, { deadlineMs: 600_000 }).check));
  console.log(JSON.stringify({ requests, onLoop, inWorker }, null, 2));
} finally {
  await s.close();
  rmSync(dir, { recursive: true, force: true });
}
