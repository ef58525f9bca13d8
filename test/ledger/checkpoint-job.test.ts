import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { latestCheckpoint } from '../../src/ledger/checkpoints/checkpoint-store.ts';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { runCheckpointPass } from '../../src/retention/checkpoint-job.ts';
import { releaseLease } from '../../src/retention/job-lease.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { startTestGateway } from '../support/gateway.ts';
import { databaseOutage } from '../support/database-outage.ts';
import { checkTotals as totals, seedRequests, tamperEntry } from '../support/retention.ts';
import { until } from '../support/until.ts';

const PERIOD = 60_000;

/** Everything a checkpoint consists of: its rows and the sums kept for the latest one. */
async function checkpointState(s: Storage) {
  const all = async (table: 'ledger_checkpoints' | 'ledger_checkpoint_wallets' | 'ledger_checkpoint_usage' | 'ledger_checkpoint_days') =>
    (await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(s.db)).rows.map((r) => JSON.stringify(r)).sort();
  return {
    checkpoints: await all('ledger_checkpoints'),
    wallets: await all('ledger_checkpoint_wallets'),
    usage: await all('ledger_checkpoint_usage'),
    days: await all('ledger_checkpoint_days'),
  };
}

for (const engine of ENGINES) {
  describe(`ledger-check checkpoint job (${engine})`, () => {
    let s: Storage;
    let url: string;
    let clock = Date.now();
    const tick = () => (clock += PERIOD);
    const pass = (holder = 'a', extra: { beforeStore?: () => void } = {}) => runCheckpointPass(s, { now: tick(), holder, periodMs: PERIOD, ...extra });
    before(async () => {
      url = await freshDatabaseUrl(engine);
      s = openStorage(url);
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('each pass checks from the latest checkpoint and stores the next; the operator check after them agrees with --full', async () => {
      await seedRequests(s, 200, 3, 'a');
      const first = await pass();
      assert.ok(first.ran && first.check.ok && first.check.from === null && first.check.stored, 'a small ledger: the job takes the first checkpoint itself');
      await seedRequests(s, 150, 2, 'b');
      const second = await pass();
      assert.ok(second.ran && second.check.stored);
      assert.equal(second.check.from?.at, first.check.stored.at, 'it started from the checkpoint before');
      assert.ok(second.check.stored.last_entry_id > first.check.stored.last_entry_id);
      await seedRequests(s, 40, 1, 'c');
      const operator = await runLedgerCheck(s.db, { full: false, now: tick() });
      assert.equal(operator.from?.at, second.check.stored.at, "the operator's check read only what came after the job's checkpoint");
      const full = await runLedgerCheck(s.db, { full: true });
      assert.deepEqual(totals(operator), totals(full));
      assert.deepEqual(totals(full), totals(await checkLedger(s.db)));
    });

    test("two instances: one holds the lease and runs; the other's pass does nothing", async () => {
      const other = openStorage(url);
      clock += 4 * PERIOD; // the lease of the earlier passes' instance has run out
      try {
        const [a, b] = await Promise.all([
          runCheckpointPass(s, { now: tick(), holder: 'one', periodMs: PERIOD }),
          runCheckpointPass(other, { now: clock, holder: 'two', periodMs: PERIOD }),
        ]);
        assert.deepEqual([a.ran, b.ran].sort(), [false, true]);
        assert.deepEqual(
          [a, b].find((o) => !o.ran),
          { ran: false, why: 'lease' },
        );
        await releaseLease(s.db, 'ledger-checkpoints', a.ran ? 'one' : 'two');
      } finally {
        await other.close();
      }
    });

    test('a crash between the check and the store leaves nothing written; the next pass stores the checkpoint and counts each row once', async () => {
      await seedRequests(s, 120, 2, 'd');
      const before = await checkpointState(s);
      await assert.rejects(
        pass('a', {
          beforeStore: () => {
            throw new Error('crash');
          },
        }),
        /crash/,
      );
      assert.deepEqual(await checkpointState(s), before, 'no checkpoint and no sums half-added');
      const next = await pass();
      assert.ok(next.ran && next.check.ok && next.check.stored);
      const after = await runLedgerCheck(s.db, { full: false, now: tick() });
      assert.deepEqual(after.problems, []);
      assert.equal(after.entries, (await checkLedger(s.db)).entries);
    });

    test('a database outage during a pass stores nothing; the pass after it recovers', async () => {
      await seedRequests(s, 80, 2, 'e');
      const before = await checkpointState(s);
      const outage = await databaseOutage(s, url);
      await assert.rejects(runCheckpointPass(outage.storage, { now: tick(), holder: 'a', periodMs: PERIOD, beforeStore: outage.start }));
      await outage.end();
      assert.deepEqual(await checkpointState(s), before);
      const next = await pass();
      assert.ok(next.ran && next.check.ok && next.check.stored);
      assert.deepEqual((await runLedgerCheck(s.db, { full: false, now: tick() })).problems, []);
    });

    describe('attack: rows forged or changed after a checkpoint', () => {
      test('an entry changed after the checkpoint fails the next pass, which stores nothing', async () => {
        const [w] = await seedRequests(s, 30, 1, 'f');
        const latest = await latestCheckpoint(s.db);
        const entry = await s.db
          .selectFrom('ledger_entries')
          .select('id')
          .where('wallet', '=', w!)
          .where('kind', '=', 'charge')
          .orderBy('id', 'desc')
          .executeTakeFirstOrThrow();
        assert.ok(Number(entry.id) > Number(latest?.last_entry_id));
        await tamperEntry(s, Number(entry.id), -9);
        const o = await pass();
        assert.ok(o.ran && !o.check.ok);
        assert.ok(
          o.check.problems.some((p) => p.startsWith(`wallet ${w}: balance`)),
          o.check.problems.join('\n'),
        );
        assert.equal(o.check.stored, null);
        assert.equal((await latestCheckpoint(s.db))?.at, latest?.at, 'the latest checkpoint is still the one before');
        await tamperEntry(s, Number(entry.id), 9);
        assert.ok(((await pass()) as { check: { ok: boolean } }).check.ok);
      });

      test("today's usage_daily changed after a checkpoint inside the day is found by the next pass (the checkpoint keeps the day's cells)", async () => {
        const [w] = await seedRequests(s, 30, 1, 'g');
        const stored = await pass();
        assert.ok(stored.ran && stored.check.stored);
        const today = Math.floor(Date.now() / 86_400_000);
        assert.ok(stored.check.stored.cells_from <= today, "the checkpoint holds today's cells");
        await sql`update usage_daily set request_count = request_count + 1 where wallet = ${w} and day = ${today}`.execute(s.db);
        const o = await pass();
        assert.ok(o.ran && !o.check.ok);
        assert.ok(
          o.check.problems.some((p) => p.includes(`wallet ${w}, day ${today}`) && p.includes('daily usage totals disagree')),
          o.check.problems.join('\n'),
        );
        await sql`update usage_daily set request_count = request_count - 1 where wallet = ${w} and day = ${today}`.execute(s.db);
      });

      test('a forged usage row after the checkpoint is found by the next pass', async () => {
        const [w] = await seedRequests(s, 10, 1, 'h');
        assert.ok(((await pass()) as { check: { ok: boolean } }).check.ok);
        await sql`insert into request_usage (request_id, wallet, api_key_id, model, provider, prompt_tokens, completion_tokens, charged_usdc, provider_cost_usdc, status, latency_ms, created_at)
          values ('forged', ${w}, 1, 'm', 'p', 1, 1, 1, 0, 'ok', 1, ${Date.now()})`.execute(s.db);
        const o = await pass();
        assert.ok(o.ran && !o.check.ok && o.check.stored === null);
        assert.ok(
          o.check.problems.some((p) => /usage totals disagree/.test(p)),
          o.check.problems.join('\n'),
        );
      });
    });
  });
}

describe('ledger-check checkpoint job in a running gateway (sqlite)', () => {
  test('the job stores a checkpoint every period; a failing check stores none, is logged and counted', async () => {
    const gw = await startTestGateway({ engine: 'sqlite', config: { ledger: { checkpointEverySeconds: 1 } } });
    try {
      const s = gw.services.storage;
      await seedRequests(s, 60, 2, 'gw');
      const count = async () => Number((await sql<{ n: number }>`select count(*) as n from ledger_checkpoints`.execute(s.db)).rows[0]?.n);
      await until(async () => (await count()) >= 2, 'two checkpoints stored by the job', 15_000);
      const [w] = await seedRequests(s, 5, 1, 'gw2');
      const entry = await s.db.selectFrom('ledger_entries').select('id').where('wallet', '=', w!).orderBy('id', 'desc').executeTakeFirstOrThrow();
      await tamperEntry(s, Number(entry.id), -3);
      const failures = async () =>
        (await gw.services.metrics.registry.getSingleMetric('tollgate_ledger_check_failures_total')?.get())?.values.find((v) => v.labels.reason === 'problems')
          ?.value ?? 0;
      await until(async () => (await failures()) >= 1, 'a failure counted', 15_000);
      const stuck = await count();
      assert.match(gw.logs(), /ledger check failed: no checkpoint stored/);
      assert.match(gw.logs(), new RegExp(`wallet ${w}: balance`));
      await until(async () => (await failures()) >= 2, 'a second failing pass', 15_000);
      assert.equal(await count(), stuck, 'a failing pass stores no checkpoint');
      const age = await gw.services.metrics.registry.getSingleMetricAsString('tollgate_ledger_checkpoint_age_seconds');
      assert.match(age, /tollgate_ledger_checkpoint_age_seconds \d/);
    } finally {
      await gw.stop();
    }
  });
});
