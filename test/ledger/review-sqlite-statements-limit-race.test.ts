import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { keyWithDailyLimit } from '../support/counters-suite.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { lockedPostgresSuite } from '../support/locked-postgres.ts';
import { until } from '../support/until.ts';

/**
 * The reserve's wallet lock returns whether the key has a spend limit (a key without one skips the
 * limit read). On PostgreSQL a statement reads other tables as of its start, so a lock that had
 * to wait read the key as it was before the wait: a limit the dashboard set and confirmed during
 * that wait must still apply to it, as it did when the limit was read after the lock.
 */
describe('attack: a spend limit set while a reserve waits for its wallet lock (postgres)', () => {
  const setup = lockedPostgresSuite();

  test('the limit confirmed during the wait applies to the reserve that waited', async () => {
    const { s, outside, wallet } = await setup();
    const apiKeyId = await keyWithDailyLimit(s.db, wallet, null);
    // The cached key says it has a limit (or the one-statement reserve was refused): the unit path.
    await outside.query('BEGIN');
    await outside.query('SELECT 1 FROM wallets WHERE address = $1 FOR UPDATE', [wallet]);
    const reserving = tryReserve(s, { wallet, apiKeyId, requestId: `${wallet}-waited`, amountUsdc: 500, leaseMs: 60_000, keyHasLimit: true });
    // The reserve's lock statement waits behind the outside session's row lock (given a moment first: polled at once, it was not seen waiting).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await until(async () => {
      const { rows } = await outside.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE wallets SET locked_usdc%'",
      );
      return rows[0].n === 1;
    }, 'the reserve waiting for the wallet lock');
    // The dashboard's change, committed before the wallet's lock is let go (here in the same transaction).
    await outside.query("UPDATE api_keys SET spend_limit_usdc = 100, spend_limit_period = 'day' WHERE id = $1", [apiKeyId]);
    await outside.query('COMMIT');
    const outcome = await reserving;
    assert.ok(!outcome.ok && outcome.refused === 'key_limit', `a reserve of 500 under a limit of 100: ${JSON.stringify(outcome)}`);
    await assertLedgerConsistent(s.db);
  });
});
