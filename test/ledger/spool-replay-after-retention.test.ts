import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { createDurableSettler } from '../../src/ledger/spool/durable-settle.ts';
import { SettleSpool } from '../../src/ledger/spool/spool-file.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { runRetentionPass } from '../../src/retention/retention-job.ts';
import { openStorage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { DAY, retentionConfig } from '../support/retention.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';
import { freshSqliteUrl, tempDir } from '../support/sqlite-engine.ts';

/**
 * attack: a spooled settle replayed after retention removed its (billed) reservation. A streamed
 * answer's settle is spooled at its first outage, before the retries (durable-settle.ts); the
 * attempt may have committed (PostgreSQL's connection dropped after the COMMIT), and an instance
 * killed then and down past `retention.reservationDays` (7) replays the line once its billed
 * reservation has left. Its usage row is still there (it leaves after `usageDays`, 90), so the
 * request is known to be billed: the replay must forget the line (`already_billed`), not report
 * it as naming no reservation and keep it in the spool, logged at error level every few seconds
 * for good, as if an answer were waiting to be billed.
 */
describe('attack: a spool line for a billed request replayed after its reservation was retired (sqlite)', () => {
  test('is found billed and forgotten, charging nothing more', async (t) => {
    const s = openStorage(freshSqliteUrl());
    t.after(() => s.close());
    await migrateToLatest(s);
    const now = Date.now();
    const wallet = await fundedWallet(s.db, 100_000);
    const record = { requestId: 'billed', wallet, chargeUsdc: 1_234, usage: usageRecord('billed', wallet) };
    assert.ok(await reserve(s, { wallet, apiKeyId: 1, requestId: 'billed', amountUsdc: 2_000, leaseMs: 60_000 }, now));
    assert.equal((await finishReservation(s, 'billed', record.chargeUsdc, record.usage, now + 1)).chargedUsdc, 1_234);
    // The line the outage left on the instance's disk, replayed when it comes back 8 days later.
    const spool = SettleSpool.open(tempDir(), 'retired');
    spool.append(record);

    const later = now + 8 * DAY;
    assert.ok((await runLedgerCheck(s.db, { full: false, now: later })).stored);
    const removed = await runRetentionPass(s, retentionConfig(join(tempDir(), 'archive'), { reservationDays: 7, usageDays: 90 }), { now: later, holder: 'a' });
    assert.equal(removed.reservations, 1, 'the billed reservation left after reservationDays');
    const usage = await s.db.selectFrom('request_usage').select('charged_usdc').where('request_id', '=', 'billed').executeTakeFirst();
    assert.equal(Number(usage?.charged_usdc), 1_234, 'its usage row is still there');

    assert.deepEqual(await applySettle(s, record, later), { kind: 'already_billed' });

    const errors: string[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => void errors.push(line) });
    const settler = createDurableSettler({ storage: s, spool, logger, failure: () => null, onApplied: () => undefined, onUnbilled: () => undefined });
    await settler.replay();
    assert.deepEqual(spool.read().records, [], 'the line is forgotten');
    assert.deepEqual(errors, [], 'nothing logged as an answer left unbilled');
    const balance = await s.db.selectFrom('wallets').select('balance_usdc').where('address', '=', wallet).executeTakeFirstOrThrow();
    assert.equal(Number(balance.balance_usdc), 100_000 - 1_234, 'charged once');
    await assertLedgerConsistent(s.db);
  });
});
