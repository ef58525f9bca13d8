import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Sqlite from 'better-sqlite3';
import { getBalance } from '../../src/ledger/balances.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { assertLedgerConsistent, fundedWallet } from '../support/ledger.ts';
import { tempDir } from '../support/sqlite-engine.ts';

/**
 * A batch of write units that meets a write lock held by another process (an admin command, a
 * backup) past busy_timeout fails as one: SQLite's busy handler waits on the calling thread, the
 * event loop, so running each unit again alone would hold the loop for one more busy_timeout per
 * unit. Nothing was reserved, and once the lock is released the same reserves succeed.
 */
let s: Storage;
let file: string;
before(async () => {
  file = join(tempDir(), 'busy.db');
  s = openStorage(`sqlite:${file}`);
  await migrateToLatest(s);
});
after(() => s.close());

test('a batch refused by a lock held elsewhere fails within one busy_timeout, whatever its size, and reserves nothing', async () => {
  const wallet = await fundedWallet(s.db, 1_000);
  const other = new Sqlite(file);
  other.exec('BEGIN IMMEDIATE');
  const started = performance.now();
  let outcomes: PromiseSettledResult<boolean>[];
  try {
    // Sent in one turn of the event loop: one batch of four units.
    outcomes = await Promise.allSettled([1, 2, 3, 4].map((i) => reserve(s, { wallet, apiKeyId: 1, requestId: `busy-${i}`, amountUsdc: 10, leaseMs: 60_000 })));
  } finally {
    other.exec('ROLLBACK');
    other.close();
  }
  const waitedMs = performance.now() - started;
  for (const outcome of outcomes) {
    assert.equal(outcome.status, 'rejected');
    assert.match(String((outcome as PromiseRejectedResult).reason?.code), /^SQLITE_BUSY/);
  }
  // busy_timeout is 5 s: one wait for the batch, not one more per unit (25 s before).
  assert.ok(waitedMs < 9_000, `the batch held its callers ${Math.round(waitedMs)} ms`);
  assert.deepEqual(await getBalance(s.db, wallet), { balance_usdc: 1_000, locked_usdc: 0, available_usdc: 1_000 });
  const again = await Promise.all([1, 2].map((i) => reserve(s, { wallet, apiKeyId: 1, requestId: `after-${i}`, amountUsdc: 10, leaseMs: 60_000 })));
  assert.deepEqual(again, [true, true]);
  await assertLedgerConsistent(s.db);
});
