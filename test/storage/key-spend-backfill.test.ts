import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { keySpendAtUpgrade } from '../../src/storage/migrations/006-key-limits.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

// Migration 006 back-fills key_spend with its own frozen copy of the bucket arithmetic (a migration
// must not change when today's code does). Today it must still agree with what the ledger keeps.
for (const engine of ENGINES) {
  describe(`migration 006's key_spend back-fill (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('equals the key_spend rows the ledger kept: settled, voided, swept and pending, across a month boundary', async () => {
      const w = await fundedWallet(s.db, 10_000);
      const key = 9_006;
      const endOfJanuary = Date.UTC(2026, 0, 31, 23, 59, 59);
      // Settled on the 30th; voided on the 31st; settled on February 1st; reserved in the last second
      // of January and swept after midnight (the release is January's); still pending.
      const plan = [
        { at: endOfJanuary - 86_400_000, leaseMs: 60_000, charge: 120 },
        { at: endOfJanuary, leaseMs: 60_000, charge: 0 },
        { at: endOfJanuary + 2_000, leaseMs: 60_000, charge: 300 },
        { at: endOfJanuary + 500, leaseMs: 1_000, charge: null },
        { at: endOfJanuary - 10_000, leaseMs: 3_600_000, charge: null },
      ];
      for (const [i, p] of plan.entries()) {
        assert.equal(await reserve(s, { wallet: w, apiKeyId: key, requestId: `${w}-${i}`, amountUsdc: 500, leaseMs: p.leaseMs }, p.at), true);
      }
      for (const [i, p] of plan.entries()) {
        if (p.charge !== null) await finishReservation(s, `${w}-${i}`, p.charge, { ...usageRecord(`${w}-${i}`, w), apiKeyId: key }, p.at + 10);
      }
      assert.equal(await sweepExpiredReservations(s.db, endOfJanuary + 5_000), 1);
      await assertLedgerConsistent(s.db);

      const kept = await s.db.selectFrom('key_spend').selectAll().where('api_key_id', '=', key).execute();
      const byBucket = (rows: { period: string; spent_usdc: number; locked_usdc: number }[]) =>
        Object.fromEntries(rows.map((r) => [r.period, [Number(r.spent_usdc), Number(r.locked_usdc)]]));
      const backfilled = (await keySpendAtUpgrade(s.db)).filter((r) => r.api_key_id === key);
      assert.deepEqual(byBucket(backfilled), byBucket(kept));
      assert.deepEqual(byBucket(kept), {
        total: [420, 500],
        'day:2026-01-30': [120, 0],
        'day:2026-01-31': [0, 500],
        'day:2026-02-01': [300, 0],
        'month:2026-01': [120, 500],
        'month:2026-02': [300, 0],
      });
    });
  });
}
