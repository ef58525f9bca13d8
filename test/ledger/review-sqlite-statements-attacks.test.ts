import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { lateCharge } from '../../src/ledger/operations/late-charge.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import type { Storage } from '../../src/storage/database.ts';
import { ENGINES } from '../support/engines.ts';
import { keyWithDailyLimit, migratedStorage } from '../support/counters-suite.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

/**
 * Attacks on SQLite's fewer-statements finish and reserve: the counters' flush failing at COMMIT, the
 * sweeper's statements (run through Kysely) next to the units' (libsql, the former driver, answered
 * a get on a cached statement last run by all() with that run's bindings), and a late charge's limit read in a batch
 * whose finishes' spend is still waiting. Each test's units are sent in one turn of the event loop.
 */
for (const engine of ENGINES) {
  describe(`attack: fewer SQLite statements per request (${engine})`, () => {
    let s: Storage;
    migratedStorage(engine, (opened) => {
      s = opened;
    });

    const newKey = (wallet: string, limitUsdc: number | null) => keyWithDailyLimit(s.db, wallet, limitUsdc);
    const reserveOne = async (wallet: string, apiKeyId: number, requestId: string, amountUsdc: number, now = Date.now()) =>
      assert.ok((await tryReserve(s, { wallet, apiKeyId, requestId, amountUsdc, leaseMs: 1_000, keyHasLimit: true }, now)).ok, requestId);
    const usageOf = (wallet: string, apiKeyId: number, requestId: string) => ({ ...usageRecord(requestId, wallet), apiKeyId });
    const balanceOf = async (wallet: string) =>
      Number((await s.db.selectFrom('wallets').select('balance_usdc').where('address', '=', wallet).executeTakeFirstOrThrow()).balance_usdc);
    const totalsOf = async (apiKeyId: number) => {
      const row = await s.db.selectFrom('usage_totals').select(['request_count', 'charged_usdc']).where('api_key_id', '=', apiKeyId).executeTakeFirst();
      return row ? [Number(row.request_count), Number(row.charged_usdc)] : [0, 0];
    };

    test('the counters written before COMMIT fail on one key (a full disk, simulated): the batch is run again unit by unit, the other keys counted once, the failing one not at all', async () => {
      const wallet = await fundedWallet(s.db, 10_000);
      const [good, doomed] = [await newKey(wallet, null), await newKey(wallet, null)];
      for (const [id, key] of [
        ['a', good],
        ['b', doomed],
        ['c', good],
      ] as const)
        await reserveOne(wallet, key, `${wallet}-${id}`, 100);
      // Only the doomed key's totals fail, and only once its finish adds to them.
      if (engine === 'sqlite') {
        await sql
          .raw(
            `CREATE TRIGGER review_full BEFORE INSERT ON usage_totals WHEN NEW.api_key_id = ${doomed}
             BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`,
          )
          .execute(s.db);
      } else {
        await sql
          .raw(`CREATE FUNCTION review_full() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'could not extend file'; END $$ LANGUAGE plpgsql`)
          .execute(s.db);
        await sql
          .raw(`CREATE TRIGGER review_full BEFORE INSERT ON usage_totals FOR EACH ROW WHEN (NEW.api_key_id = ${doomed}) EXECUTE FUNCTION review_full()`)
          .execute(s.db);
      }
      try {
        const outcomes = await Promise.allSettled([
          finishReservation(s, `${wallet}-a`, 30, usageOf(wallet, good, `${wallet}-a`)),
          finishReservation(s, `${wallet}-b`, 40, usageOf(wallet, doomed, `${wallet}-b`)),
          finishReservation(s, `${wallet}-c`, 50, usageOf(wallet, good, `${wallet}-c`)),
        ]);
        assert.deepEqual(
          outcomes.map((o) => o.status),
          ['fulfilled', 'rejected', 'fulfilled'],
        );
      } finally {
        await sql.raw('DROP TRIGGER review_full' + (engine === 'postgres' ? ' ON usage_totals' : '')).execute(s.db);
      }
      assert.deepEqual(await totalsOf(good), [2, 80]);
      assert.deepEqual(await totalsOf(doomed), [0, 0]);
      assert.equal(await balanceOf(wallet), 10_000 - 80);
      const doomedBuckets = await s.db.selectFrom('key_spend').select(['spent_usdc', 'locked_usdc']).where('api_key_id', '=', doomed).execute();
      for (const b of doomedBuckets) assert.deepEqual([Number(b.spent_usdc), Number(b.locked_usdc)], [0, 100], 'the failed finish left its reservation locked');
      // Nothing of it was half-written: it finishes once the disk has room.
      assert.equal((await finishReservation(s, `${wallet}-b`, 40, usageOf(wallet, doomed, `${wallet}-b`))).chargedUsdc, 40);
      assert.deepEqual(await totalsOf(doomed), [1, 40]);
      await assertLedgerConsistent(s.db);
    });

    test("the sweeper's statements (Kysely) between finishes and late charges (units) never lend them their bindings: each moves its own wallet's money", async () => {
      const t0 = Date.now();
      const [w1, w2, w3] = [await fundedWallet(s.db, 1_000), await fundedWallet(s.db, 2_000), await fundedWallet(s.db, 3_000)];
      const [k1, k2, k3] = [await newKey(w1, 300), await newKey(w2, null), await newKey(w3, null)];
      await reserveOne(w1, k1, `${w1}-swept`, 100, t0);
      await reserveOne(w1, k1, `${w1}-settled`, 100, t0);
      await reserveOne(w2, k2, `${w2}-x`, 200, t0);
      await reserveOne(w3, k3, `${w3}-swept`, 300, t0);
      // w1's first request and w3's run out of lease; the others are finished after the sweep.
      await s.db
        .updateTable('reservations')
        .set({ lease_expires_at: t0 + 60_000 })
        .where('request_id', 'in', [`${w1}-settled`, `${w2}-x`])
        .execute();
      assert.equal(await sweepExpiredReservations(s.db, t0 + 5_000), 2);

      // One batch: w1's settle spends 250 of its key's 300, so w1's late charge may take only 50;
      // w2's settle and w3's late charge are each their own wallet's.
      const [settled1, settled2, late1, late3] = await Promise.all([
        finishReservation(s, `${w1}-settled`, 250, usageOf(w1, k1, `${w1}-settled`)),
        finishReservation(s, `${w2}-x`, 150, usageOf(w2, k2, `${w2}-x`)),
        lateCharge(s, { requestId: `${w1}-swept`, wallet: w1, chargeUsdc: 100, usage: usageOf(w1, k1, `${w1}-swept`) }, t0 + 6_000),
        lateCharge(s, { requestId: `${w3}-swept`, wallet: w3, chargeUsdc: 120, usage: usageOf(w3, k3, `${w3}-swept`) }, t0 + 6_000),
      ]);
      assert.deepEqual([settled1.chargedUsdc, settled1.balanceUsdc], [250, 750]);
      assert.deepEqual([settled2.chargedUsdc, settled2.balanceUsdc], [150, 1_850]);
      assert.ok(late1.kind === 'late' && late3.kind === 'late');
      assert.deepEqual([late1.outcome.chargedUsdc, late1.outcome.shortfallUsdc], [50, 50], "the late charge saw the settle's spend still waiting in the batch");
      assert.deepEqual([late3.outcome.chargedUsdc, late3.outcome.balanceUsdc], [120, 2_880]);
      assert.deepEqual([await balanceOf(w1), await balanceOf(w2), await balanceOf(w3)], [700, 1_850, 2_880]);
      assert.deepEqual(await totalsOf(k1), [2, 300]);
      await assertLedgerConsistent(s.db);
    });
  });
}
