import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Kysely, KyselyPlugin, QueryId } from 'kysely';
import { latestCheckpoint } from '../../src/ledger/checkpoints/checkpoint-store.ts';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { Database } from '../../src/storage/schema.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { checkTotals, DAY, seedRequests } from '../support/retention.ts';

const PERIOD = 60_000;

/**
 * `db` with `hook` run once, right after the first query whose tree names `table` (and, for raw SQL,
 * contains `text`) returned: what another writer does at that moment of a check, on its own connection.
 */
function afterQuery(db: Kysely<Database>, table: string, hook: () => Promise<void>): Kysely<Database> {
  const seen = new WeakMap<QueryId, boolean>();
  let fired = false;
  const plugin: KyselyPlugin = {
    transformQuery: (a) => {
      seen.set(a.queryId, JSON.stringify(a.node).includes(`"${table}"`));
      return a.node;
    },
    transformResult: async (a) => {
      if (!fired && seen.get(a.queryId)) {
        fired = true;
        await hook();
      }
      return a.result;
    },
  };
  return db.withPlugin(plugin);
}

for (const engine of ENGINES) {
  describe(`attack: a checkpoint made of different moments (${engine})`, () => {
    let s: Storage;
    let other: Storage;
    let clock = Date.now();
    const tick = () => (clock += PERIOD);
    before(async () => {
      const url = await freshDatabaseUrl(engine);
      s = openStorage(url);
      await migrateToLatest(s);
      other = openStorage(url);
      await seedRequests(s, 60, 3, 'seed');
      assert.ok((await runLedgerCheck(s.db, { full: false, now: tick() })).stored);
    });
    after(async () => {
      await other.close();
      await s.close();
    });

    test('a batch committed between the boundary read and the sums is not in the checkpoint; the next check agrees with a full one', async () => {
      await seedRequests(s, 40, 2, 'before');
      // The boundary's query is the first to name request_usage.
      const db = afterQuery(s.db, 'request_usage', async () => void (await seedRequests(other, 50, 2, 'between')));
      const c = await runLedgerCheck(db, { full: false, now: tick() });
      assert.ok(c.ok && c.stored, c.problems.join('\n'));
      const maxEntry = Number(
        (
          await s.db
            .selectFrom('ledger_entries')
            .select((e) => e.fn.max('id').as('m'))
            .executeTakeFirstOrThrow()
        ).m,
      );
      assert.ok(c.stored.last_entry_id < maxEntry, 'the batch committed after the boundary');
      const operator = await runLedgerCheck(s.db, { full: false, now: tick() });
      assert.deepEqual(operator.problems, []);
      assert.deepEqual(checkTotals(operator), checkTotals(await checkLedger(s.db)), 'no row counted twice nor missed');
    });

    test("an operator's check storing a checkpoint between the job's reading the latest one and its snapshot: no false alarm, no double count", async () => {
      await seedRequests(s, 40, 2, 'job-period');
      const operatorNow = tick();
      // The job read the latest checkpoint; before its snapshot an operator's `ledger-check` (another process) stores the next.
      const db = afterQuery(s.db, 'ledger_checkpoints', async () => {
        const op = await runLedgerCheck(other.db, { full: false, now: operatorNow });
        assert.ok(op.ok && op.stored);
      });
      const job = await runLedgerCheck(db, { full: false, now: tick() });
      assert.deepEqual(job.problems, [], 'the sums of one checkpoint read with the boundary of another');
      assert.equal(job.stored, null, 'the operator stored this period');
      assert.equal(job.from?.at, operatorNow, "the job checked from the operator's checkpoint, whose sums its snapshot holds");
      const operator = await runLedgerCheck(s.db, { full: false, now: tick() });
      assert.deepEqual(operator.problems, []);
      assert.deepEqual(checkTotals(operator), checkTotals(await checkLedger(s.db)));
    });

    test('the 30-day prune keeps the checkpoint a store adds to, even a month old, and the newest; the older ones go', async () => {
      const start = (await latestCheckpoint(s.db))?.at ?? 0;
      await seedRequests(s, 10, 1, 'old');
      clock = start + 40 * DAY;
      const prev = await runLedgerCheck(s.db, { full: false, now: clock });
      assert.ok(prev.stored);
      await seedRequests(s, 10, 1, 'gap');
      // A month with no checkpoint: the next store adds to `prev`, now older than the window.
      clock += 35 * DAY;
      const next = await runLedgerCheck(s.db, { full: false, now: clock });
      assert.ok(next.ok && next.stored);
      const ats = (await s.db.selectFrom('ledger_checkpoints').select('at').orderBy('at').execute()).map((r) => Number(r.at));
      assert.deepEqual(ats, [prev.stored.at, next.stored.at], 'everything older than prev went; prev and the new one stay');
      const operator = await runLedgerCheck(s.db, { full: false, now: tick() });
      assert.deepEqual(operator.problems, []);
      assert.deepEqual(checkTotals(operator), checkTotals(await checkLedger(s.db)));
      const ats2 = (await s.db.selectFrom('ledger_checkpoints').select('at').orderBy('at').execute()).map((r) => Number(r.at));
      assert.deepEqual(ats2, [next.stored.at, operator.stored?.at], 'prev goes once a newer one is within the window');
    });
  });
}
