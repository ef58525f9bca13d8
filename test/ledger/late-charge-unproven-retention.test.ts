import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { runRetentionPass } from '../../src/retention/retention-job.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { fundedWallet, usageRecord } from '../support/ledger.ts';
import { DAY, retentionConfig } from '../support/retention.ts';

/**
 * attack: a late charge lands on a reservation a checkpoint already covers, and retention runs
 * before the next check. The sweeper released the request (its instance went down with the
 * settle spooled); a checkpoint was taken; the spool is replayed 8 days later and charges the
 * answer, above its reservation (a late charge is bounded by the free balance, not the
 * reservation). The reservation now has a usage row, so it counts as billed and past
 * `reservationDays`; its id is below the checkpoint's. If retention removes it before a check has
 * read the late charge, no check ever sees that charge against its reservation: neither the
 * charge-once rule nor the "charged above its reservation" finding the operator is told to read.
 * Retention removes only what a checkpoint has proven: a reservation finished after the latest
 * checkpoint waits for the next one.
 */
for (const engine of ENGINES) {
  describe(`attack: a late charge after a checkpoint, then retention, then the check (${engine})`, () => {
    const opened: Storage[] = [];
    after(async () => {
      for (const s of opened) await s.close();
    });

    // Billed within the usage window (it leaves for its usage row), and past it (it would leave as unbilled).
    for (const usageDays of [90, 7]) {
      test(`the charge above its reservation is listed by the next check, and the reservation leaves only after it (usageDays ${usageDays})`, async () => {
        const s = openStorage(await freshDatabaseUrl(engine));
        opened.push(s);
        await migrateToLatest(s);
        const wallet = await fundedWallet(s.db, 100_000);
        const t0 = Date.now();
        const requestId = randomUUID();
        assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId, amountUsdc: 2_000, leaseMs: 1 }, t0), true);
        assert.equal(await sweepExpiredReservations(s.db, t0 + 60_000), 1);
        const later = t0 + 8 * DAY;
        assert.ok((await runLedgerCheck(s.db, { full: false, now: later })).stored, 'a checkpoint covers the swept reservation');

        const late = await applySettle(s, { requestId, wallet, chargeUsdc: 5_000, usage: usageRecord(requestId, wallet) }, later);
        assert.equal(late.kind, 'late');
        const config = retentionConfig(join(tempDir(), 'archive'), { reservationDays: 7, usageDays });
        await runRetentionPass(s, config, { now: later + 1_000, holder: 'a' });

        const finding = `request ${requestId} (wallet ${wallet}): charged 5000 above its reservation of 2000`;
        const incremental = await runLedgerCheck(s.db, { full: false, now: later + 2_000 });
        assert.deepEqual(incremental.problems, []);
        assert.ok(incremental.findings.includes(finding), `the incremental check lists the late charge: ${JSON.stringify(incremental.findings)}`);
        assert.ok(incremental.stored, 'a checkpoint now covers the late charge');
        const full = await runLedgerCheck(s.db, { full: true });
        assert.ok(full.findings.includes(finding), 'so does --full');

        // Proven now: the next pass may remove it.
        const removed = await runRetentionPass(s, config, { now: later + 3_000, holder: 'a' });
        assert.equal(removed.reservations, 1, 'the reservation leaves once a checkpoint covers its late charge');
        assert.deepEqual((await runLedgerCheck(s.db, { full: true })).problems, []);
        assert.deepEqual((await runLedgerCheck(s.db, { full: false, now: later + 4_000 })).problems, []);
      });
    }
  });
}
