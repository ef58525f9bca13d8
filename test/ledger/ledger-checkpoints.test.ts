import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { sql } from 'kysely';
import { migrateTo, migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { checkTotals as totals, DAY, seedRequests, tamperEntry } from '../support/retention.ts';

for (const engine of ENGINES) {
  describe(`ledger-check checkpoints (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());
    // The checks run "later": every row written now belongs to a closed day.
    const later = Date.now() + 2 * DAY;

    test('the first check reads everything and stores a checkpoint; the next reads only what came after, and agrees with a full check', async () => {
      await seedRequests(s, 300, 3, 'a');
      const first = await runLedgerCheck(s.db, { full: false, now: later });
      assert.deepEqual(first.problems, []);
      assert.equal(first.from, null);
      assert.ok(first.stored, 'a checkpoint is stored');
      assert.equal(first.stored.entries, first.entries, 'the checkpoint holds what the full check computed');
      assert.equal(first.stored.credits_usdc, first.creditsUsdc);
      assert.equal(first.stored.charges_usdc, first.chargesUsdc);

      await seedRequests(s, 120, 2, 'b');
      const incremental = await runLedgerCheck(s.db, { full: false, now: later });
      assert.equal(incremental.from?.at, first.stored.at, 'it started from the checkpoint');
      assert.equal(incremental.stored?.at, later + 1, 'it stored the next, after the one it started from though its clock did not move');
      const full = await runLedgerCheck(s.db, { full: true, now: later });
      assert.equal(full.from, null);
      assert.deepEqual(totals(incremental), totals(full));
      assert.deepEqual(totals(full), totals(await checkLedger(s.db)));

      const nextDay = await runLedgerCheck(s.db, { full: false, now: later + DAY });
      assert.ok(nextDay.stored && nextDay.stored.at === later + DAY);
      assert.equal(nextDay.stored.entries, full.entries, 'the advanced checkpoint equals the full count');
      assert.equal(nextDay.stored.charges_usdc, full.chargesUsdc);
    });

    test('attack: a row tampered with before the checkpoint is found by --full; one after it by the incremental check', async () => {
      const before = await runLedgerCheck(s.db, { full: false, now: later + 2 * DAY });
      assert.deepEqual(before.problems, []);
      const old = await s.db.selectFrom('ledger_entries').select('id').where('kind', '=', 'charge').orderBy('id').limit(1).executeTakeFirstOrThrow();
      await tamperEntry(s, Number(old.id), -5);
      const incremental = await runLedgerCheck(s.db, { full: false, now: later + 2 * DAY });
      assert.deepEqual(incremental.problems, [], 'the checkpoint vouches for what it proved');
      const full = await runLedgerCheck(s.db, { full: true });
      assert.ok(
        full.problems.some((p) => /balance \d+ != ledger sum/.test(p)),
        full.problems.join('\n'),
      );

      await tamperEntry(s, Number(old.id), 5);
      const [w] = await seedRequests(s, 20, 1, 'c');
      const recent = await s.db
        .selectFrom('ledger_entries')
        .select('id')
        .where('wallet', '=', w!)
        .where('kind', '=', 'charge')
        .orderBy('id', 'desc')
        .limit(1)
        .executeTakeFirstOrThrow();
      await tamperEntry(s, Number(recent.id), -7);
      const after = await runLedgerCheck(s.db, { full: false, now: later + 2 * DAY });
      assert.ok(after.from, 'checked from the checkpoint');
      assert.ok(
        after.problems.some((p) => p.startsWith(`wallet ${w}: balance`)),
        after.problems.join('\n'),
      );
      assert.equal(after.stored, null, 'a failed check stores no checkpoint');
      await tamperEntry(s, Number(recent.id), 7);
    });
    test("migration 019 turns a day checkpoint into one at that day's end, with no cells; the check from it agrees with --full", async () => {
      const old = openStorage(await freshDatabaseUrl(engine));
      try {
        await migrateTo(old, '018-channels');
        await seedRequests(old, 60, 2, 'm');
        const today = Math.floor(Date.now() / DAY);
        // What a daily ledger-check of the day form left: the day, its boundaries, its totals and its sums.
        await sql`insert into ledger_checkpoints (day, last_entry_id, last_usage_id, last_reservation_id, entries, credits_usdc, charges_usdc, created_at)
          select ${today}, (select max(id) from ledger_entries), (select max(id) from request_usage), (select max(id) from reservations), count(*),
            sum(case when amount_usdc > 0 then amount_usdc else 0 end), sum(case when amount_usdc < 0 then -amount_usdc else 0 end), 0 from ledger_entries`.execute(
          old.db,
        );
        await sql`insert into ledger_checkpoint_wallets (wallet, ledger_usdc) select wallet, sum(amount_usdc) from ledger_entries group by wallet`.execute(
          old.db,
        );
        await sql`insert into ledger_checkpoint_usage (api_key_id, request_count, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, charged_usdc, provider_cost_usdc)
          select api_key_id, count(*), sum(prompt_tokens), sum(completion_tokens), sum(reasoning_tokens), sum(cached_tokens), sum(charged_usdc), sum(provider_cost_usdc)
          from request_usage group by api_key_id`.execute(old.db);
        await migrateToLatest(old);
        const [migrated] = await old.db.selectFrom('ledger_checkpoints').selectAll().execute();
        assert.equal(Number(migrated?.at), (today + 1) * DAY);
        assert.equal(Number(migrated?.cells_from), today + 1);
        await seedRequests(old, 40, 2, 'n');
        const next = await runLedgerCheck(old.db, { full: false, now: (today + 1) * DAY + 3_600_000 });
        assert.equal(next.from?.at, (today + 1) * DAY);
        assert.deepEqual(totals(next), totals(await runLedgerCheck(old.db, { full: true })));
        assert.ok(next.stored);
      } finally {
        await old.close();
      }
    });
  });
}
