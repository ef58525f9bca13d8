import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import type { Storage } from '../../src/storage/database.ts';
import { ENGINES } from '../support/engines.ts';
import { keyWithDailyLimit, migratedStorage, setDailyLimit } from '../support/counters-suite.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

/**
 * Attacks on SQLite's batch counters (src/storage/batch-counters.ts) and the reserve's limit flag:
 * every unit of a test is sent in one turn of the event loop, so on SQLite they share one batch;
 * PostgreSQL runs them in the same (wallet) order and must give the same figures.
 */
for (const engine of ENGINES) {
  describe(`attack: batch counters and the key limit (${engine})`, () => {
    let s: Storage;
    migratedStorage(engine, (opened) => {
      s = opened;
    });

    const newKey = (wallet: string, limitUsdc: number | null) => keyWithDailyLimit(s.db, wallet, limitUsdc);
    const setLimit = (apiKeyId: number, limitUsdc: number) => setDailyLimit(s.db, apiKeyId, limitUsdc);
    const reserveOne = (wallet: string, apiKeyId: number, requestId: string, amountUsdc: number, keyHasLimit = true) =>
      tryReserve(s, { wallet, apiKeyId, requestId, amountUsdc, leaseMs: 60_000, keyHasLimit });
    const finishOne = (wallet: string, apiKeyId: number, requestId: string, chargeUsdc: number) =>
      finishReservation(s, requestId, chargeUsdc, { ...usageRecord(requestId, wallet), apiKeyId });
    const bucketsOf = async (apiKeyId: number) =>
      (await s.db.selectFrom('key_spend').select(['spent_usdc', 'locked_usdc']).where('api_key_id', '=', apiKeyId).execute()).map((b) => [
        Number(b.spent_usdc),
        Number(b.locked_usdc),
      ]);

    test('a limit read in the same batch as finishes of the same key sees their waiting releases and charges: exactly the room they left is admitted', async () => {
      const wallet = await fundedWallet(s.db, 10_000);
      const apiKeyId = await newKey(wallet, 300);
      for (const id of ['a', 'b', 'c']) assert.ok((await reserveOne(wallet, apiKeyId, `${wallet}-${id}`, 100)).ok);
      assert.equal((await reserveOne(wallet, apiKeyId, `${wallet}-full`, 100)).ok, false, 'the limit is full');

      // One batch: a void (releases 100), a settle of 50 (releases 100, spends 50), then two reserves of 100:
      // the room is 300 - 50 spent - 100 locked = 150, so the first fits and the second does not.
      const [voided, settled, first, second] = await Promise.all([
        finishOne(wallet, apiKeyId, `${wallet}-a`, 0),
        finishOne(wallet, apiKeyId, `${wallet}-b`, 50),
        reserveOne(wallet, apiKeyId, `${wallet}-d`, 100),
        reserveOne(wallet, apiKeyId, `${wallet}-e`, 100),
      ]);
      assert.ok(voided.applied && settled.applied);
      assert.equal(first.ok, true, 'the reserve after the finishes saw the room they left');
      assert.ok(!second.ok && second.refused === 'key_limit', 'the next one saw the first counted');
      for (const b of await bucketsOf(apiKeyId)) assert.deepEqual(b, [50, 200]);
      await assertLedgerConsistent(s.db);
    });

    test('a limit set by the dashboard after the key was cached without one still refuses: the lock says the key has a limit now', async () => {
      const wallet = await fundedWallet(s.db, 10_000);
      const apiKeyId = await newKey(wallet, null);
      assert.ok((await reserveOne(wallet, apiKeyId, `${wallet}-before`, 100, false)).ok);
      await setLimit(apiKeyId, 150);
      // The cached hint still says "no limit"; the limit admits 50 more.
      const [over, within] = await Promise.all([
        reserveOne(wallet, apiKeyId, `${wallet}-over`, 100, false),
        reserveOne(wallet, apiKeyId, `${wallet}-within`, 50, false),
      ]);
      assert.ok(!over.ok && over.refused === 'key_limit' && over.limitUsdc === 150);
      assert.deepEqual(within, { ok: true, keyLimited: true });
      for (const b of await bucketsOf(apiKeyId)) assert.deepEqual(b, [0, 150]);
      await assertLedgerConsistent(s.db);
    });

    test('the charge a finish computes in SQL is the old payable for every case: above its reservation, capped by the balance, zero; whole micro-USDC', async () => {
      // balance 1000; the finished reservation locks 100, others lock 600: payable = max(0, min(asked, 1000 - 600)).
      const cases: Array<[asked: number, expected: number]> = [
        [0, 0],
        [1, 1],
        [100, 100],
        [250, 250],
        [400, 400],
        [401, 400],
        [9_007_199_254_740, 400],
      ];
      for (const [asked, expected] of cases) {
        const wallet = await fundedWallet(s.db, 1_000);
        const apiKeyId = await newKey(wallet, null);
        assert.ok((await reserveOne(wallet, apiKeyId, `${wallet}-other`, 600, false)).ok);
        assert.ok((await reserveOne(wallet, apiKeyId, `${wallet}-mine`, 100, false)).ok);
        const done = await finishOne(wallet, apiKeyId, `${wallet}-mine`, asked);
        assert.deepEqual(done, { applied: true, chargedUsdc: expected, shortfallUsdc: asked - expected, balanceUsdc: 1_000 - expected }, `asked ${asked}`);
        const row = await s.db
          .selectFrom('reservations')
          .select(['status', 'charged_usdc'])
          .where('request_id', '=', `${wallet}-mine`)
          .executeTakeFirstOrThrow();
        assert.deepEqual([row.status, Number(row.charged_usdc)], [expected > 0 ? 'settled' : 'voided', expected]);
        if (engine === 'sqlite') {
          const types = await sql<{ t: string }>`SELECT typeof(charged_usdc) AS t FROM reservations WHERE request_id = ${`${wallet}-mine`}`.execute(s.db);
          assert.equal(types.rows[0]!.t, 'integer', 'the charge is stored as an integer, never a float');
        }
        // A second finish of it, and one of a request never reserved, change nothing.
        assert.equal((await finishOne(wallet, apiKeyId, `${wallet}-mine`, asked)).applied, false);
        assert.equal((await finishOne(wallet, apiKeyId, `${wallet}-never`, asked)).applied, false);
      }
      await assertLedgerConsistent(s.db);
    });

    test('many batches over several keys and wallets, reserves refused and finishes repeated: totals, days and buckets equal the rows they count', async () => {
      const wallets = [await fundedWallet(s.db, 50_000), await fundedWallet(s.db, 50_000), await fundedWallet(s.db, 3_000)];
      const keys = await Promise.all(wallets.flatMap((w, i) => [newKey(w, i === 0 ? 2_000 : null), newKey(w, null)]));
      const owner = (k: number) => wallets[Math.floor(k / 2)]!;
      let seq = 0;
      const open: Array<{ k: number; id: string }> = [];
      for (let round = 0; round < 12; round++) {
        const reserving = Array.from({ length: 10 }, (_, i) => ({ k: (round + i) % keys.length, id: `${engine}-many-${seq++}` }));
        const finishing = open.splice(0, open.length);
        const results = await Promise.all([
          ...finishing.flatMap(({ k, id }, i) => [finishOne(owner(k), keys[k]!, id, (i * 37) % 230), finishOne(owner(k), keys[k]!, id, 5)]),
          ...reserving.map(({ k, id }) => reserveOne(owner(k), keys[k]!, id, 200, k === 0)),
        ]);
        const reserves = results.slice(finishing.length * 2) as Awaited<ReturnType<typeof tryReserve>>[];
        reserving.forEach((r, i) => reserves[i]!.ok && open.push(r));
      }
      await Promise.all(open.map(({ k, id }) => finishOne(owner(k), keys[k]!, id, 1)));
      for (const apiKeyId of keys) {
        const rows = await s.db
          .selectFrom('request_usage')
          .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.sum<number>('charged_usdc').as('charged')])
          .where('api_key_id', '=', apiKeyId)
          .executeTakeFirstOrThrow();
        const totals = await s.db.selectFrom('usage_totals').select(['request_count', 'charged_usdc']).where('api_key_id', '=', apiKeyId).executeTakeFirst();
        const daily = await s.db
          .selectFrom('usage_daily')
          .select((eb) => [eb.fn.sum<number>('request_count').as('n'), eb.fn.sum<number>('charged_usdc').as('charged')])
          .where('api_key_id', '=', apiKeyId)
          .executeTakeFirstOrThrow();
        assert.ok(Number(rows.n) > 0, `key ${apiKeyId} finished requests`);
        assert.deepEqual([Number(totals?.request_count), Number(totals?.charged_usdc)], [Number(rows.n), Number(rows.charged)], `totals of key ${apiKeyId}`);
        assert.deepEqual([Number(daily.n), Number(daily.charged)], [Number(rows.n), Number(rows.charged)], `days of key ${apiKeyId}`);
        for (const b of await bucketsOf(apiKeyId)) assert.deepEqual(b, [Number(rows.charged), 0], `buckets of key ${apiKeyId}`);
      }
      await assertLedgerConsistent(s.db);
      // What `tollgate admin ledger-check --full` runs.
      const full = await runLedgerCheck(s.db, { full: true });
      assert.deepEqual([full.ok, full.problems], [true, []]);
    });
  });
}
