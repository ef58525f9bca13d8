import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { usageRecord } from '../support/ledger.ts';
import { lockedPostgresSuite } from '../support/locked-postgres.ts';

/**
 * The late charge locks its wallet, then its swept reservation; a finish locks its reservation with
 * its wallet; the sweeper its reservation, then its wallet. One wallet, the three at once, lined up
 * behind a row lock a fourth connection holds: when it lets go, all three must finish (no lock
 * cycle left unbroken, no error out to a caller) and the ledger must add up.
 */
describe('attack: a late charge, a finish and the sweeper on one wallet at once (postgres)', () => {
  const lockedPostgres = lockedPostgresSuite();

  test('all three complete once the wallet is free: the finish bills, the late charge bills, the sweeper releases', async () => {
    const { s, outside, wallet, waitingOnLocks } = await lockedPostgres();
    const t0 = Date.now();
    const [finishing, swept, expiring] = [randomUUID(), randomUUID(), randomUUID()];
    assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId: swept, amountUsdc: 500, leaseMs: 1 }, t0), true);
    assert.equal(await sweepExpiredReservations(s.db, t0 + 10), 1);
    assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId: finishing, amountUsdc: 500, leaseMs: 600_000 }, t0 + 20), true);
    assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId: expiring, amountUsdc: 500, leaseMs: 1 }, t0 + 30), true);
    const now = t0 + 60_000;

    await outside.query('BEGIN');
    await outside.query('SELECT 1 FROM wallets WHERE address = $1 FOR UPDATE', [wallet]);
    const settle = (requestId: string) => applySettle(s, { requestId, wallet, chargeUsdc: 300, usage: usageRecord(requestId, wallet) }, now);
    const all = Promise.allSettled([settle(finishing), settle(swept), sweepExpiredReservations(s.db, now)]);
    try {
      await waitingOnLocks(2);
    } finally {
      await outside.query('COMMIT');
    }
    const [finished, late, sweep] = await all;
    assert.equal(finished.status, 'fulfilled', String((finished as PromiseRejectedResult).reason));
    assert.equal(late.status, 'fulfilled', String((late as PromiseRejectedResult).reason));
    assert.equal(sweep.status, 'fulfilled', String((sweep as PromiseRejectedResult).reason));
    assert.equal((finished as PromiseFulfilledResult<Awaited<ReturnType<typeof applySettle>>>).value.kind, 'settled');
    assert.equal((late as PromiseFulfilledResult<Awaited<ReturnType<typeof applySettle>>>).value.kind, 'late');
    assert.equal((sweep as PromiseFulfilledResult<number>).value, 1);
    const w = await s.db.selectFrom('wallets').select(['balance_usdc', 'locked_usdc']).where('address', '=', wallet).executeTakeFirstOrThrow();
    assert.deepEqual([Number(w.balance_usdc), Number(w.locked_usdc)], [10_000 - 600, 0], 'two answers billed 300 each, nothing left locked');
    assert.deepEqual((await checkLedger(s.db)).problems, []);
  });
});
