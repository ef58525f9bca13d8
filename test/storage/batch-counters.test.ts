import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

/**
 * The key's spend buckets, its totals and its day's totals are counter statements: on SQLite a
 * group-commit batch adds them up and writes each row once (src/storage/batch-counters.ts). Every
 * test sends its units in one turn of the event loop, so on SQLite they share one batch; the same
 * figures must come out on PostgreSQL, where each unit runs its statements at once.
 */
for (const engine of ENGINES) {
  describe(`counters added up per batch (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    const keyWithLimit = async (wallet: string, limitUsdc: number | null) => {
      const key = await insertKey(s.db, wallet, generateKey(randomBytes(32)), 'counters');
      if (limitUsdc !== null)
        await s.db.updateTable('api_keys').set({ spend_limit_usdc: limitUsdc, spend_limit_period: 'day' }).where('id', '=', key.id).execute();
      return key.id;
    };
    const bucketsOf = (apiKeyId: number) =>
      s.db.selectFrom('key_spend').select(['period', 'spent_usdc', 'locked_usdc']).where('api_key_id', '=', apiKeyId).orderBy('period').execute();
    const totalsOf = (apiKeyId: number) =>
      s.db.selectFrom('usage_totals').select(['request_count', 'charged_usdc']).where('api_key_id', '=', apiKeyId).executeTakeFirstOrThrow();
    const dailyOf = (apiKeyId: number) =>
      s.db.selectFrom('usage_daily').select(['request_count', 'charged_usdc']).where('api_key_id', '=', apiKeyId).executeTakeFirstOrThrow();
    const numbers = <T extends object>(row: T) =>
      Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v]));

    test('of 12 reserves sent at once under a limit for 5, exactly 5 count in the buckets: the refused ones add nothing, each limit read sees the ones before it', async () => {
      const wallet = await fundedWallet(s.db, 10_000);
      const apiKeyId = await keyWithLimit(wallet, 500);
      const reserveOne = (i: number) => tryReserve(s, { wallet, apiKeyId, requestId: `${wallet}-${i}`, amountUsdc: 100, leaseMs: 60_000, keyHasLimit: true });
      const outcomes = await Promise.all(Array.from({ length: 12 }, (_, i) => reserveOne(i)));
      assert.equal(outcomes.filter((o) => o.ok).length, 5, 'exactly K of N under the key limit');
      assert.equal(outcomes.filter((o) => !o.ok && o.refused === 'key_limit').length, 7);
      const buckets = (await bucketsOf(apiKeyId)).map(numbers);
      assert.equal(buckets.length, 3);
      for (const b of buckets) assert.deepEqual([b.spent_usdc, b.locked_usdc], [0, 500], `bucket ${b.period}`);

      // The five finishes in one batch: each bucket takes every charge and releases every lock.
      const admitted = outcomes.flatMap((o, i) => (o.ok ? [`${wallet}-${i}`] : []));
      const charges = [0, 10, 20, 30, 40];
      const settled = await Promise.all(admitted.map((id, i) => finishReservation(s, id, charges[i]!, { ...usageRecord(id, wallet), apiKeyId })));
      assert.ok(settled.every((o) => o.applied));
      for (const b of (await bucketsOf(apiKeyId)).map(numbers)) assert.deepEqual([b.spent_usdc, b.locked_usdc], [100, 0], `bucket ${b.period}`);
      assert.deepEqual(numbers(await totalsOf(apiKeyId)), { request_count: 5, charged_usdc: 100 });
      assert.deepEqual(numbers(await dailyOf(apiKeyId)), { request_count: 5, charged_usdc: 100 });
      await assertLedgerConsistent(s.db);
    });

    test('a batch whose unit fails after counting is re-run unit by unit: the totals count each committed unit once and the failed one not at all', async () => {
      const wallet = await fundedWallet(s.db, 10_000);
      const apiKeyId = await keyWithLimit(wallet, null);
      const reserveOne = (requestId: string, amountUsdc: number) => tryReserve(s, { wallet, apiKeyId, requestId, amountUsdc, leaseMs: 60_000 });
      // The twin locks and counts its amount, then its reservation's insert meets the UNIQUE
      // request id: the whole batch rolls back and each unit runs again alone.
      const [a, twin, c] = await Promise.allSettled([reserveOne(`${wallet}-a`, 100), reserveOne(`${wallet}-a`, 200), reserveOne(`${wallet}-c`, 300)]);
      assert.equal(a.status, 'fulfilled');
      assert.equal(twin.status, 'rejected');
      assert.equal(c.status, 'fulfilled');
      for (const b of (await bucketsOf(apiKeyId)).map(numbers)) assert.deepEqual([b.spent_usdc, b.locked_usdc], [0, 400], `bucket ${b.period}`);

      // The same for finishes: a second finish of the same request in the same batch changes nothing.
      const outcomes = await Promise.all([
        finishReservation(s, `${wallet}-a`, 60, { ...usageRecord(`${wallet}-a`, wallet), apiKeyId }),
        finishReservation(s, `${wallet}-a`, 60, { ...usageRecord(`${wallet}-a`, wallet), apiKeyId }),
        finishReservation(s, `${wallet}-c`, 70, { ...usageRecord(`${wallet}-c`, wallet), apiKeyId }),
      ]);
      assert.deepEqual(
        outcomes.map((o) => o.applied),
        [true, false, true],
      );
      for (const b of (await bucketsOf(apiKeyId)).map(numbers)) assert.deepEqual([b.spent_usdc, b.locked_usdc], [130, 0], `bucket ${b.period}`);
      assert.deepEqual(numbers(await totalsOf(apiKeyId)), { request_count: 2, charged_usdc: 130 });
      assert.deepEqual(numbers(await dailyOf(apiKeyId)), { request_count: 2, charged_usdc: 130 });
      await assertLedgerConsistent(s.db);
    });
  });
}
