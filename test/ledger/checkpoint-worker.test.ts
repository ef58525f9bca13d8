import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import type { CheckpointFailPoint } from '../../src/retention/checkpoint-check.ts';
import { checkpointJob, runCheckpointPass } from '../../src/retention/checkpoint-job.ts';
import { checkpointThread } from '../../src/retention/checkpoint-thread.ts';
import { releaseLease } from '../../src/retention/job-lease.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { bulkRequests } from '../support/bulk-requests.ts';
import { threadCpuMs, watchTurns } from '../support/loop-hold.ts';
import { checkpointState, checkTotals, seedRequests } from '../support/retention.ts';
import { freshSqliteUrl } from '../support/sqlite-engine.ts';
import { until } from '../support/until.ts';

const PERIOD = 60_000;
/** A period of the job at 1,000 req/s. */
const LARGE_PERIOD = 60_000;
/**
 * The rule: a checkpoint pass never holds the SQLite gateway's event loop for more than a slice of
 * a request's budget. On the loop, SQLite's synchronous calls ran a whole pass in one turn (about
 * 5 µs a request of the period: 300 ms for this one).
 */
const LOOP_BOUND_MS = 50;

/**
 * The event loop while `work` runs: the most CPU time one turn took on this thread (what the
 * gateway's own code held it for: the scheduler of a shared machine stretches wall time by itself,
 * and the process's CPU time would count the worker's) and the longest delay
 * monitorEventLoopDelay saw (wall time).
 */
async function loopDuring<T>(work: () => Promise<T>): Promise<{ result: T; longestTurnCpuMs: number; maxDelayMs: number }> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  // Its first sample only starts the clock: a loop held before it would go unseen.
  await new Promise((r) => setTimeout(r, 20));
  const turns = watchTurns(threadCpuMs);
  try {
    const result = await work();
    const longestTurnCpuMs = turns.stop();
    // The histogram records a held loop at its next sample, a turn later.
    await new Promise((r) => setTimeout(r, 5));
    return { result, longestTurnCpuMs, maxDelayMs: delay.max / 1e6 };
  } finally {
    turns.stop();
    delay.disable();
  }
}

describe('the checkpoint pass in a worker thread (sqlite)', () => {
  let s: Storage;
  let url: string;
  let wallets: string[];
  let clock = Date.now();
  const tick = () => (clock += PERIOD);
  const inWorker = (failPoint: CheckpointFailPoint | null = null, deadlineMs = 120_000) => checkpointThread(url, { deadlineMs, failPoint }).check;
  before(async () => {
    url = freshSqliteUrl();
    s = openStorage(url);
    await migrateToLatest(s);
    wallets = await seedRequests(s, 40, 4, 'seed');
    const first = await runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD });
    assert.ok(first.ran && first.check.stored);
  });
  after(() => s.close());

  test(`a pass over a minute at 1,000 req/s holds one turn for all of it on the loop; in the worker none past ${LOOP_BOUND_MS} ms`, async (t) => {
    await bulkRequests(s, wallets, LARGE_PERIOD, 'on-loop');
    const onLoop = await loopDuring(() => runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD }));
    assert.ok(onLoop.result.ran && onLoop.result.check.stored);
    t.diagnostic(`on the loop: longest turn ${onLoop.longestTurnCpuMs.toFixed(1)} ms CPU, max loop delay ${onLoop.maxDelayMs.toFixed(1)} ms`);
    // What this test tells apart: the pass as it ran on the serving thread.
    assert.ok(onLoop.longestTurnCpuMs > LOOP_BOUND_MS, `the pass on the loop held one turn ${onLoop.longestTurnCpuMs} ms`);

    await bulkRequests(s, wallets, LARGE_PERIOD, 'in-worker');
    const off = await loopDuring(() =>
      Promise.all([runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD, check: inWorker() }), seedRequests(s, 300, 3, 'meanwhile')]),
    );
    const [pass] = off.result;
    t.diagnostic(`in the worker: longest turn ${off.longestTurnCpuMs.toFixed(1)} ms CPU, max loop delay ${off.maxDelayMs.toFixed(1)} ms`);
    assert.ok(pass.ran && pass.check.ok && pass.check.stored, 'the worker checked the period and stored its checkpoint while the ledger was written');
    assert.ok(pass.check.stored.last_entry_id - (pass.check.from?.last_entry_id ?? 0) >= LARGE_PERIOD);
    assert.ok(off.longestTurnCpuMs < LOOP_BOUND_MS, `the loop was held ${off.longestTurnCpuMs} ms in one turn`);
    const operator = await runLedgerCheck(s.db, { full: false, now: tick() });
    assert.deepEqual(operator.problems, []);
    assert.deepEqual(checkTotals(operator), checkTotals(await checkLedger(s.db)), 'the checkpoint the worker stored agrees with a check of all history');
  });

  test("a writer beside the store (the gateway's, committing every 50 ms) makes the store wait for the lock, not fail", async () => {
    await seedRequests(s, 60, 2, 'beside');
    const { default: Sqlite } = await import('better-sqlite3');
    const writer = new Sqlite(url.slice('sqlite:'.length));
    writer.exec('PRAGMA busy_timeout = 5000');
    const bump = writer.prepare(
      "insert into job_leases (name, holder, expires_at) values ('test-writer', 'w', 1) on conflict (name) do update set expires_at = expires_at + 1",
    );
    let passing = true;
    let commits = 0;
    // From when the lease is held (this thread's writes would wait for the writer this thread runs): a read before the
    // store's first write would pin a snapshot that each of these commits makes stale.
    const write = async () => {
      while (passing) {
        writer.exec('BEGIN IMMEDIATE');
        bump.run();
        await new Promise((r) => setTimeout(r, 40));
        writer.exec('COMMIT');
        commits++;
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    let writing: Promise<void> | undefined;
    const check = inWorker();
    try {
      const pass = await runCheckpointPass(s, {
        now: tick(),
        holder: 'a',
        periodMs: PERIOD,
        check: (now) => {
          writing = write();
          return check(now);
        },
      }).finally(() => (passing = false));
      assert.ok(pass.ran && pass.check.ok && pass.check.stored, 'stored while the writer kept committing');
    } finally {
      await writing;
      writer.close();
    }
    assert.ok(commits > 0);
  });

  test('a crash of the worker inside the store stores nothing and leaves no lock; the next pass stores the checkpoint, counting each row once', async () => {
    await seedRequests(s, 100, 2, 'crash');
    const before = await checkpointState(s);
    await assert.rejects(runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD, check: inWorker('crash-in-store') }), /without an outcome/);
    assert.deepEqual(await checkpointState(s), before, 'no checkpoint and no sums half-added');
    await seedRequests(s, 20, 1, 'after-crash'); // the write lock is free: this would wait out busy_timeout and fail
    const next = await runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD, check: inWorker() });
    assert.ok(next.ran && next.check.ok && next.check.stored);
    const operator = await runLedgerCheck(s.db, { full: false, now: tick() });
    assert.deepEqual(operator.problems, []);
    assert.deepEqual(checkTotals(operator), checkTotals(await checkLedger(s.db)));
  });

  test('a hung worker is ended at its deadline: the pass fails, nothing is stored, the next pass runs', async () => {
    await seedRequests(s, 30, 1, 'hang');
    const before = await checkpointState(s);
    await assert.rejects(runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD, check: inWorker('hang', 1_500) }), /ran over 1.5 s/);
    assert.deepEqual(await checkpointState(s), before);
    const next = await runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD, check: inWorker() });
    assert.ok(next.ran && next.check.ok && next.check.stored);
  });

  describe('the job', () => {
    before(() => releaseLease(s.db, 'ledger-checkpoints', 'a'));
    const job = (failPoint: CheckpointFailPoint | null) => {
      const logs: string[] = [];
      const sink = new Writable({ write: (chunk, _enc, done) => done(void logs.push(chunk.toString())) });
      const counted: string[] = [];
      const j = checkpointJob(s, {
        periodSeconds: 1,
        now: tick,
        logger: pino(sink),
        failures: { inc: ({ reason }) => void counted.push(reason) },
        workerDatabaseUrl: url,
        failPoint,
      });
      return { job: j, logs, counted };
    };

    test('a crashing worker is counted as an error each pass and logged; the gateway process lives on', async () => {
      const { job: j, logs, counted } = job('crash-in-store');
      const before = await checkpointState(s);
      j.start();
      try {
        await until(async () => counted.length >= 2, 'two failed passes counted', 20_000);
      } finally {
        await j.stop();
      }
      assert.deepEqual([...new Set(counted)], ['error']);
      assert.match(logs.join(''), /ledger checkpoint pass could not run; the next pass tries again/);
      assert.deepEqual(await checkpointState(s), before);
    });

    test('stop() ends a pass in flight at once: its worker is gone, nothing stored, nothing counted', async () => {
      const { job: j, counted } = job('hang');
      const before = await checkpointState(s);
      j.start();
      // The lease, given up by the stops before, is held again once a pass started.
      const held = async () =>
        Number((await s.db.selectFrom('job_leases').select('expires_at').where('name', '=', 'ledger-checkpoints').executeTakeFirst())?.expires_at) > 0;
      await until(held, 'a pass holding the lease', 10_000);
      await new Promise((r) => setTimeout(r, 500)); // its worker started and hangs
      const started = performance.now();
      await j.stop();
      assert.ok(performance.now() - started < 5_000, 'stop did not wait for the hung pass');
      assert.deepEqual(counted, []);
      assert.deepEqual(await checkpointState(s), before);
    });
  });
});
