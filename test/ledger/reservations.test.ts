import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { getBalance } from '../../src/ledger/balances.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, newWallet, usageRecord } from '../support/ledger.ts';

for (const engine of ENGINES) {
  describe(`reservations (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    const funded = (amount: number) => fundedWallet(s.db, amount);
    const ok = () => assertLedgerConsistent(s.db);

    test('reserve locks, settle charges once and releases the rest; a second finish changes nothing', async () => {
      const w = await funded(1000);
      assert.equal(await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-a`, amountUsdc: 600, leaseMs: 60_000 }), true);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 600, available_usdc: 400 });
      await ok();
      assert.equal(
        await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-b`, amountUsdc: 401, leaseMs: 60_000 }),
        false,
        'cannot lock more than is available',
      );
      const first = await finishReservation(s, `${w}-a`, 250, usageRecord(`${w}-a`, w));
      assert.deepEqual(first, { applied: true, chargedUsdc: 250, shortfallUsdc: 0, balanceUsdc: 750 });
      const again = await finishReservation(s, `${w}-a`, 250, usageRecord(`${w}-a`, w));
      assert.equal(again.applied, false);
      const voidAfter = await finishReservation(s, `${w}-a`, 0, usageRecord(`${w}-a`, w));
      assert.equal(voidAfter.applied, false);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 750, locked_usdc: 0, available_usdc: 750 });
      await ok();
    });

    test('racing settles of one reservation charge it once', async () => {
      const w = await funded(1000);
      await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-r`, amountUsdc: 500, leaseMs: 60_000 });
      const results = await Promise.allSettled(Array.from({ length: 10 }, () => finishReservation(s, `${w}-r`, 300, usageRecord(`${w}-r`, w))));
      const applied = results.filter((r) => r.status === 'fulfilled' && r.value.applied).length;
      assert.equal(applied, 1);
      assert.equal((await getBalance(s.db, w)).balance_usdc, 700);
      await ok();
    });

    test('a true cost above the reservation is charged up to what is available, never below zero', async () => {
      const w = await funded(1000);
      await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-x`, amountUsdc: 100, leaseMs: 60_000 });
      await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-y`, amountUsdc: 300, leaseMs: 60_000 });
      const outcome = await finishReservation(s, `${w}-x`, 5000, usageRecord(`${w}-x`, w));
      assert.deepEqual(outcome, { applied: true, chargedUsdc: 700, shortfallUsdc: 4300, balanceUsdc: 300 }, 'the other request keeps its 300 locked');
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 300, locked_usdc: 300, available_usdc: 0 });
      await finishReservation(s, `${w}-y`, 0, usageRecord(`${w}-y`, w));
      await ok();
    });

    test('racing overcharging settles on one wallet each see the balance the one before left', async () => {
      // Five reservations of 100 on 1,000, each settled concurrently at 300. One at a time, the
      // charges are 300, 300, 200, 100 and 100: each may use only what the others do not hold
      // locked. A settle computing from a stale wallet row would charge 300 five times.
      const w = await funded(1000);
      const ids = Array.from({ length: 5 }, (_, i) => `${w}-o${i}`);
      for (const requestId of ids) assert.equal(await reserve(s, { wallet: w, apiKeyId: 1, requestId, amountUsdc: 100, leaseMs: 60_000 }), true);
      const outcomes = await Promise.all(ids.map((id) => finishReservation(s, id, 300, usageRecord(id, w))));
      assert.deepEqual(
        outcomes.map((o) => o.chargedUsdc).sort((a, b) => a - b),
        [100, 100, 200, 300, 300],
      );
      assert.equal(
        outcomes.reduce((sum, o) => sum + o.shortfallUsdc, 0),
        500,
      );
      assert.deepEqual(
        outcomes.map((o) => o.balanceUsdc).sort((a, b) => a! - b!),
        [0, 100, 200, 400, 700],
      );
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      await ok();
    });

    test('the sweeper voids only expired reservations, and a late settle then changes nothing', async () => {
      const w = await funded(1000);
      const now = Date.now();
      await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-old`, amountUsdc: 200, leaseMs: 1000 }, now - 5000);
      await reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-live`, amountUsdc: 300, leaseMs: 60_000 }, now);
      assert.ok((await sweepExpiredReservations(s.db, now)) >= 1);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 300, available_usdc: 700 });
      const rows = await s.db.selectFrom('reservations').select(['request_id', 'status']).where('wallet', '=', w).orderBy('id').execute();
      assert.deepEqual(
        rows.map((r) => r.status),
        ['voided', 'pending'],
      );
      assert.equal((await finishReservation(s, `${w}-old`, 150, usageRecord(`${w}-old`, w))).applied, false);
      await finishReservation(s, `${w}-live`, 100, usageRecord(`${w}-live`, w));
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 900, locked_usdc: 0, available_usdc: 900 });
      await ok();
    });

    test('a wallet that was never funded cannot reserve', async () => {
      assert.equal(await reserve(s, { wallet: newWallet(), apiKeyId: 1, requestId: `none-${engine}`, amountUsdc: 1, leaseMs: 1000 }), false);
    });
  });
}
