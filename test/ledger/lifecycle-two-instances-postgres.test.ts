import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { latestCheckpoint } from '../../src/ledger/checkpoints/checkpoint-store.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { retireReservationBatch } from '../../src/ledger/retention/retire-reservations.ts';
import { retireUsageBatch } from '../../src/ledger/retention/retire-usage.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { fundedWallet, usageRecord } from '../support/ledger.ts';

const DAY = 86_400_000;

/**
 * attack: two PostgreSQL instances (two pools) at once, each past its lease: retention batches
 * (reservations and usage rows, windows 0 days so everything checkpointed may leave), ledger-checks
 * storing checkpoints, the sweeper, late charges and live reserves and finishes on the same wallets
 * and keys. Afterwards --full passes and each key's usage total and total spend equal what the
 * requests were charged.
 */
describe('attack: retention, checkpoints and live traffic on two PostgreSQL instances at once', () => {
  test('no money or usage is lost or counted twice', async (t) => {
    const url = await freshDatabaseUrl('postgres');
    const a: Storage = openStorage(url);
    const b: Storage = openStorage(url);
    t.after(async () => {
      await a.close();
      await b.close();
    });
    await migrateToLatest(a);
    const wallets = [await fundedWallet(a.db, 50_000_000), await fundedWallet(a.db, 50_000_000)];
    const dir = join(tempDir(), 'archive');
    const charged = new Map<number, number>();
    const add = (k: number, v: number) => charged.set(k, (charged.get(k) ?? 0) + v);
    let n = 0;
    let stop = false;

    const traffic = async (s: Storage, lane: number) => {
      while (!stop) {
        const w = wallets[n % 2]!;
        // A key belongs to one wallet: its rows are written under that wallet's lock only.
        const key = 1 + (n % 2) + 2 * (n % 3);
        const id = `r${lane}-${n++}`;
        const leaseMs = n % 4 === 0 ? 1 : 600_000;
        const out = await tryReserve(s, { wallet: w, apiKeyId: key, requestId: id, amountUsdc: 1_000, leaseMs });
        if (!out.ok) continue;
        if (leaseMs === 1) {
          await new Promise((r) => setTimeout(r, 5));
          await sweepExpiredReservations(s.db);
          const late = await applySettle(s, { requestId: id, wallet: w, chargeUsdc: 700, usage: { ...usageRecord(id, w), apiKeyId: key } });
          if (late.kind === 'late' || late.kind === 'settled') add(key, late.outcome.chargedUsdc);
        } else {
          const o = await finishReservation(s, id, 300 + (n % 900), { ...usageRecord(id, w), apiKeyId: key });
          if (o.applied) add(key, o.chargedUsdc);
        }
      }
    };
    const checks = async (s: Storage) => {
      while (!stop) {
        const c = await runLedgerCheck(s.db, { full: false }).catch((err) => ({ problems: [String(err)] }));
        assert.deepEqual(c.problems, []);
      }
    };
    const retention = async (s: Storage) => {
      while (!stop) {
        const cp = await latestCheckpoint(s.db);
        if (!cp) {
          await new Promise((r) => setTimeout(r, 10));
          continue;
        }
        const far = Date.now() + DAY;
        await retireReservationBatch(s, { cutoff: far, unbilledCutoff: far, coveredId: cp.last_reservation_id, provenUsageId: cp.last_usage_id, rows: 20 });
        await retireUsageBatch(s, dir, { cutoff: far, coveredId: cp.last_usage_id, rows: 20 });
      }
    };
    const running = [traffic(a, 0), traffic(b, 1), traffic(a, 2), checks(a), checks(b), retention(a), retention(b)];
    await new Promise((r) => setTimeout(r, 8_000));
    stop = true;
    await Promise.all(running);
    const final = await runLedgerCheck(a.db, { full: false });
    assert.deepEqual(final.problems, []);
    const full = await checkLedger(a.db);
    assert.deepEqual(full.problems, []);
    const retired = await a.db
      .selectFrom('retired_usage')
      .select((eb) => eb.fn.sum<number>('request_count').as('n'))
      .executeTakeFirst();
    assert.ok(Number(retired?.n ?? 0) > 0, 'retention removed usage rows');
    const totals = new Map(
      (await a.db.selectFrom('usage_totals').select(['api_key_id', 'charged_usdc']).execute()).map((r) => [Number(r.api_key_id), Number(r.charged_usdc)]),
    );
    const spend = new Map(
      (await a.db.selectFrom('key_spend').select(['api_key_id', 'spent_usdc']).where('period', '=', 'total').execute()).map((r) => [
        Number(r.api_key_id),
        Number(r.spent_usdc),
      ]),
    );
    for (const [k, v] of charged) {
      assert.equal(totals.get(k), v, `key ${k}: usage total`);
      assert.equal(spend.get(k), v, `key ${k}: total spend`);
    }
  });
});
