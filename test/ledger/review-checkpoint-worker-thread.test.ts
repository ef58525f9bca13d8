import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import pino from 'pino';
import { latestCheckpoint } from '../../src/ledger/checkpoints/checkpoint-store.ts';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { checkpointJob, runCheckpointPass } from '../../src/retention/checkpoint-job.ts';
import { checkpointThread } from '../../src/retention/checkpoint-thread.ts';
import { releaseLease } from '../../src/retention/job-lease.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { checkpointState, checkTotals, seedRequests, tamperEntry } from '../support/retention.ts';
import { freshSqliteUrl } from '../support/sqlite-engine.ts';
import { startTestGateway } from '../support/gateway.ts';
import { until } from '../support/until.ts';

const PERIOD = 60_000;

describe('attack: the checkpoint worker (sqlite)', () => {
  let s: Storage;
  let url: string;
  let clock = Date.now();
  const tick = () => (clock += PERIOD);
  before(async () => {
    url = freshSqliteUrl();
    s = openStorage(url);
    await migrateToLatest(s);
    await seedRequests(s, 40, 2, 'seed');
    const first = await runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD, check: checkpointThread(url, { deadlineMs: 60_000 }).check });
    assert.ok(first.ran && first.check.stored);
    await releaseLease(s.db, 'ledger-checkpoints', 'a');
  });
  after(() => s.close());
  /** The gateway's job with its worker on `workerDatabaseUrl`, run until a pass is counted as failed: what it logged and counted. */
  const untilAFailedPass = async (workerDatabaseUrl: string) => {
    const logs: string[] = [];
    const counted: string[] = [];
    const job = checkpointJob(s, {
      periodSeconds: 1,
      now: tick,
      logger: pino(new Writable({ write: (chunk, _enc, done) => done(void logs.push(chunk.toString())) })),
      failures: { inc: ({ reason }) => void counted.push(reason) },
      workerDatabaseUrl,
    });
    job.start();
    try {
      await until(async () => counted.length >= 1, 'a failed pass counted', 20_000);
    } finally {
      await job.stop();
    }
    return { logs: logs.join(''), counted };
  };

  test("an entry forged in the period is found by the worker's pass: counted and logged as problems, nothing stored", async () => {
    const [w] = await seedRequests(s, 30, 1, 'forged');
    const latest = await latestCheckpoint(s.db);
    const entry = await s.db.selectFrom('ledger_entries').select('id').where('wallet', '=', w!).orderBy('id', 'desc').executeTakeFirstOrThrow();
    assert.ok(Number(entry.id) > Number(latest?.last_entry_id), 'the entry is in the period the next pass checks');
    await tamperEntry(s, Number(entry.id), 7);
    const before = await checkpointState(s);
    const { logs, counted } = await untilAFailedPass(url);
    assert.deepEqual([...new Set(counted)], ['problems'], 'a check that ran and failed, not a worker that could not run');
    assert.match(logs, /ledger check failed: no checkpoint stored/);
    assert.match(logs, new RegExp(`wallet ${w}: balance`), 'the log names the wallet whose entries were changed');
    assert.deepEqual(await checkpointState(s), before, 'no checkpoint over the forged entry');
    await tamperEntry(s, Number(entry.id), -7);
  });

  test("a SQLite error in the worker reaches the operator's log with its message (the SQLite driver's errors are not Errors a thread passes on whole)", async () => {
    // A file without the ledger's tables: the worker's first query fails as a corrupt or foreign file's would.
    const { logs, counted } = await untilAFailedPass(freshSqliteUrl());
    assert.deepEqual([...new Set(counted)], ['error']);
    assert.match(logs, /could not run/);
    assert.match(logs, /no such table: ledger_checkpoints/, logs);
    assert.match(logs, /"code":"SQLITE_ERROR"/, 'and its code');
  });

  test('a pass terminated inside the store (deadline, stop) stores nothing and leaves no lock: writes go on, the next pass stores once', async () => {
    await seedRequests(s, 50, 2, 'terminated');
    const before = await checkpointState(s);
    const worker = new Worker(new URL('../../src/retention/worker-entry.mjs', import.meta.url), {
      workerData: { module: new URL('../support/checkpoint-hang-in-store-worker.ts', import.meta.url).href, input: { databaseUrl: url, now: tick() } },
    });
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    await new Promise<void>((resolve, reject) => {
      worker.once('message', () => resolve());
      worker.once('error', reject);
    });
    // The worker holds SQLite's write lock with the sums added: the gateway's writes wait for it (and here give up).
    const quickWriter = async (tag: string) => {
      const writer = openStorage(url);
      try {
        await sql`pragma busy_timeout = 200`.execute(writer.db);
        await seedRequests(writer, 10, 1, tag);
      } finally {
        await writer.close();
      }
    };
    await assert.rejects(quickWriter('while-held'), /SQLITE_BUSY|locked/i, 'the worker holds the write lock');
    await worker.terminate();
    await exited;
    assert.deepEqual(await checkpointState(s), before, 'nothing half-added');
    await quickWriter('after-terminate'); // fails as above if the ended thread's lock stayed
    const next = await runCheckpointPass(s, { now: tick(), holder: 'a', periodMs: PERIOD, check: checkpointThread(url, { deadlineMs: 60_000 }).check });
    assert.ok(next.ran && next.check.ok && next.check.stored);
    const operator = await runLedgerCheck(s.db, { full: false, now: tick() });
    assert.deepEqual(operator.problems, []);
    assert.deepEqual(checkTotals(operator), checkTotals(await checkLedger(s.db)), 'each row counted once');
  });
});

describe('attack: the checkpoint job on an in-memory SQLite database', () => {
  test('no worker (its own connection would open another, empty database): the pass runs on the loop and stores checkpoints', async () => {
    const gw = await startTestGateway({ engine: 'sqlite', databaseUrl: 'sqlite::memory:', config: { ledger: { checkpointEverySeconds: 1 } } });
    try {
      await seedRequests(gw.services.storage, 20, 1, 'memory');
      const stored = async () => (await gw.services.storage.db.selectFrom('ledger_checkpoints').select('at').execute()).length >= 2;
      await until(stored, 'two checkpoints stored in the in-memory database', 20_000);
      assert.doesNotMatch(gw.logs(), /could not run|ledger check failed/, gw.logs());
      await gw.assertLedger();
    } finally {
      await gw.stop();
    }
  });
});
