import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';

/**
 * attack: the findings of `tollgate admin ledger-check` across a checkpoint. docs/operations.md
 * tells the operator to run `ledger-check` from cron and read its findings: each request charged
 * above its reservation, and each answer charged late for less than its price (settle_shortfalls).
 * Without --full the command is the incremental check from the latest checkpoint (the gateway's job
 * stores one every minute on PostgreSQL), and that check lists a charge above the reservation only
 * for reservations created after the checkpoint, and never a shortfall: a request reserved before a
 * checkpoint and settled after it, and every late charge that fell short, never show up in the
 * command the operator runs (only in --full).
 */
for (const engine of ENGINES)
  describe(`attack: ledger-check findings across a checkpoint (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('a charge above its reservation settled after the checkpoint, and a late charge that fell short, are findings of the check from it', async () => {
      const now = Date.now();
      const wallet = await fundedWallet(s.db, 10_000);
      // Reserved before the checkpoint, settled after it, above its reservation (a provider over-reporting).
      assert.ok(await reserve(s, { wallet, apiKeyId: 1, requestId: 'over', amountUsdc: 500, leaseMs: 600_000 }, now));
      // Swept before the checkpoint (its process died), its answer's settle replayed after it.
      assert.ok(await reserve(s, { wallet, apiKeyId: 1, requestId: 'late', amountUsdc: 500, leaseMs: 1 }, now));
      assert.equal(await sweepExpiredReservations(s.db, now + 10), 1);
      const first = await runLedgerCheck(s.db, { full: false, now: now + 20 });
      assert.deepEqual(first.problems, []);
      assert.ok(first.stored, 'a checkpoint was stored');

      const over = await finishReservation(s, 'over', 800, usageRecord('over', wallet), now + 30);
      assert.equal(over.chargedUsdc, 800);
      // The wallet holds 9,200 free; the late answer is priced at 20,000: charged 9,200, 10,800 short.
      const late = await applySettle(s, { requestId: 'late', wallet, chargeUsdc: 20_000, usage: usageRecord('late', wallet) }, now + 40);
      assert.equal(late.kind, 'late');
      assert.equal(late.kind === 'late' && late.outcome.shortfallUsdc, 10_800);
      await assertLedgerConsistent(s.db);

      const full = await runLedgerCheck(s.db, { full: true });
      assert.deepEqual(full.problems, []);
      const overFinding = full.findings.find((f) => f.startsWith('request over '));
      const lateFinding = full.findings.find((f) => f.startsWith('request late '));
      assert.ok(overFinding && lateFinding, `--full lists both: ${full.findings.join(' | ')}`);

      const incremental = await runLedgerCheck(s.db, { full: false, now: now + 50 });
      assert.equal(incremental.from?.at, first.stored.at, 'checked from the checkpoint');
      assert.deepEqual(incremental.problems, []);
      assert.ok(incremental.findings.includes(overFinding), `the charge above its reservation is a finding: ${JSON.stringify(incremental.findings)}`);
      assert.ok(incremental.findings.includes(lateFinding), `the late charge's shortfall is a finding: ${JSON.stringify(incremental.findings)}`);
    });
  });
