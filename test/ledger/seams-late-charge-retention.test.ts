import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { runRetentionPass, type RetentionPassOutcome } from '../../src/retention/retention-job.ts';
import type { Storage } from '../../src/storage/database.ts';
import { tempDir } from '../support/engines.ts';
import { usageRecord } from '../support/ledger.ts';
import { DAY, retentionConfig } from '../support/retention.ts';
import { lockedPostgresSuite } from '../support/locked-postgres.ts';

/**
 * A late charge (a spooled settle replayed after the sweeper released its reservation) racing the
 * retention pass that deletes that swept reservation once it is past the usage window. On
 * PostgreSQL the two run in separate transactions on separate connections; a third connection
 * holds a row lock to stop the late charge at a chosen statement while retention runs. Whatever
 * the order, the request is billed with its reservation there (and its key's spend counted in
 * `retired_key_spend` when the reservation leaves), or not billed at all: ledger-check stays clean.
 */
describe('attack: a late charge racing the retention of its swept reservation (postgres)', () => {
  const lockedPostgres = lockedPostgresSuite();

  async function sweptRequest() {
    const { s, outside, wallet, waitingOnLocks } = await lockedPostgres();
    const t0 = Date.now();
    // Its answer was delivered and its settle spooled on an instance that then stayed down; the
    // sweeper released the reservation. The spool comes back after the usage window.
    const requestId = randomUUID();
    assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId, amountUsdc: 500, leaseMs: 1 }, t0), true);
    assert.equal(await sweepExpiredReservations(s.db, t0 + 60_000), 1);
    const later = t0 + 10 * DAY;
    assert.ok((await runLedgerCheck(s.db, { full: false, now: later })).stored, 'a checkpoint covers it: retention may remove it');
    const replay = () => applySettle(s, { requestId, wallet, chargeUsdc: 300, usage: usageRecord(requestId, wallet) }, later);
    const retention = () => runRetentionPass(s, retentionConfig(join(tempDir(), 'archive'), { reservationDays: 1, usageDays: 3 }), { now: later, holder: 'a' });
    return { s, outside, wallet, requestId, replay, retention, waitingOnLocks };
  }

  /** Ledger-check, the full one and the incremental one, finds nothing, and the key's spend matches what was billed. */
  async function ledgerClean(s: Storage, billed: number): Promise<void> {
    assert.deepEqual((await checkLedger(s.db)).problems, []);
    assert.deepEqual((await runLedgerCheck(s.db, { full: true })).problems, []);
    const spend = await s.db.selectFrom('key_spend').select('spent_usdc').where('api_key_id', '=', 1).where('period', '=', 'total').executeTakeFirst();
    assert.equal(Number(spend?.spent_usdc ?? 0), billed, "the key's total spend is what was billed");
  }

  test('retention deletes the reservation while the late charge waits for its wallet: nothing is billed against the deleted row', async () => {
    const { s, outside, wallet, replay, retention, waitingOnLocks } = await sweptRequest();
    // Another request of the same wallet holds its row lock: the late charge waits for it.
    await outside.query('BEGIN');
    await outside.query('SELECT 1 FROM wallets WHERE address = $1 FOR UPDATE', [wallet]);
    const late = replay();
    await waitingOnLocks(1);
    let retired: RetentionPassOutcome;
    try {
      retired = await retention();
    } finally {
      await outside.query('COMMIT');
    }
    assert.equal(retired.reservations, 1, 'the swept reservation left with the usage window');
    assert.equal((await late).kind, 'unknown', 'its reservation is gone: the late charge bills nothing');
    await ledgerClean(s, 0);
  });

  test('the late charge holds the reservation when retention deletes it: its charge is counted in retired_key_spend', async () => {
    const { s, outside, replay, retention, waitingOnLocks } = await sweptRequest();
    // The late charge has its wallet and its reservation, and waits at the key's spend buckets.
    await outside.query('BEGIN');
    await outside.query('SELECT 1 FROM key_spend WHERE api_key_id = 1 FOR UPDATE');
    const late = replay();
    await waitingOnLocks(1);
    const retiring = retention();
    let retired: RetentionPassOutcome;
    try {
      await waitingOnLocks(2);
    } finally {
      await outside.query('COMMIT');
      retired = await retiring;
    }
    const outcome = await late;
    assert.equal(outcome.kind, 'late', 'the late charge had the reservation first: it bills the answer');
    assert.equal(retired.reservations, 1);
    const kept = await s.db.selectFrom('retired_key_spend').select('spent_usdc').where('api_key_id', '=', 1).executeTakeFirst();
    assert.equal(Number(kept?.spent_usdc ?? 0), 300, 'the retired reservation took its charge into retired_key_spend');
    await ledgerClean(s, 300);
  });
});
