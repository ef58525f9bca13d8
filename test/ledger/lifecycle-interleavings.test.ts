import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { runRetentionPass } from '../../src/retention/retention-job.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { fundedWallet, usageRecord } from '../support/ledger.ts';
import { freshSqliteUrl, tempDir } from '../support/sqlite-engine.ts';
import { retentionConfig } from '../support/retention.ts';

const HOUR = 3_600_000;

function rng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

/**
 * attack: reserves, finishes (some above their reservation), the sweeper, late charges, incremental
 * checks that store checkpoints and retention passes (usageDays 2, reservationDays 1, small
 * batches), interleaved over simulated days by a seeded generator. After every step the incremental
 * check passes; every 25 steps --full passes, agrees with the incremental check's totals, lists
 * every finding the incremental check lists, and each key's usage total and total spend equal what
 * was charged, across the rows retention rolled up.
 */
describe('attack: retention, checkpoints, sweeps and late charges interleaved over days (sqlite)', () => {
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    test(`seed ${seed}`, async (t) => {
      const s: Storage = openStorage(freshSqliteUrl());
      t.after(() => s.close());
      await migrateToLatest(s);
      const r = rng(seed);
      const dir = join(tempDir(), 'archive');
      const config = retentionConfig(dir, { usageDays: 2, reservationDays: 1, batchRows: 7 });
      let now = Date.UTC(2026, 5, 1, 20);
      const wallets = [await fundedWallet(s.db, 3_000_000), await fundedWallet(s.db, 200_000)];
      const pending: { id: string; wallet: string; key: number; amount: number }[] = [];
      const swept: { id: string; wallet: string; key: number }[] = [];
      const charged = new Map<number, number>();
      let n = 0;
      for (let step = 0; step < 400; step++) {
        now += Math.floor(r() * 2 * HOUR);
        const roll = r();
        if (roll < 0.35) {
          const wallet = wallets[Math.floor(r() * wallets.length)]!;
          const key = 1 + Math.floor(r() * 3) + (wallet === wallets[1] ? 10 : 0);
          const id = `s${seed}-${n++}`;
          const amount = 100 + Math.floor(r() * 2_000);
          const out = await tryReserve(s, { wallet, apiKeyId: key, requestId: id, amountUsdc: amount, leaseMs: HOUR }, now);
          if (out.ok) pending.push({ id, wallet, key, amount });
        } else if (roll < 0.6 && pending.length) {
          const p = pending.splice(Math.floor(r() * pending.length), 1)[0]!;
          const ask = Math.floor(r() * p.amount * 1.5);
          const o = await finishReservation(s, p.id, ask, { ...usageRecord(p.id, p.wallet), apiKeyId: p.key }, now);
          if (o.applied) charged.set(p.key, (charged.get(p.key) ?? 0) + o.chargedUsdc);
          else swept.push(p);
        } else if (roll < 0.7) {
          await sweepExpiredReservations(s.db, now);
        } else if (roll < 0.78 && swept.length) {
          const p = swept.splice(Math.floor(r() * swept.length), 1)[0]!;
          const o = await applySettle(
            s,
            { requestId: p.id, wallet: p.wallet, chargeUsdc: Math.floor(r() * 3000), usage: { ...usageRecord(p.id, p.wallet), apiKeyId: p.key } },
            now,
          );
          if (o.kind === 'late' || o.kind === 'settled') charged.set(p.key, (charged.get(p.key) ?? 0) + o.outcome.chargedUsdc);
        } else if (roll < 0.9) {
          const c = await runLedgerCheck(s.db, { full: false, now });
          assert.deepEqual(c.problems, [], `step ${step}: incremental check`);
        } else {
          await runRetentionPass(s, config, { now, holder: 'a', budgetMs: 50 });
        }
        // The sweeper's released reservations are the swept list's source too.
        for (let i = pending.length - 1; i >= 0; i--) {
          const row = await s.db.selectFrom('reservations').select('status').where('request_id', '=', pending[i]!.id).executeTakeFirst();
          if (row && row.status !== 'pending') swept.push(...pending.splice(i, 1));
        }
        if (step % 25 === 24) {
          const full = await runLedgerCheck(s.db, { full: true });
          assert.deepEqual(full.problems, [], `step ${step}: full check`);
          const inc = await runLedgerCheck(s.db, { full: false, now, store: false });
          if (inc.from) {
            assert.deepEqual([inc.entries, inc.creditsUsdc, inc.chargesUsdc, inc.wallets], [full.entries, full.creditsUsdc, full.chargesUsdc, full.wallets]);
            for (const f of inc.findings) assert.ok(full.findings.includes(f), `step ${step}: ${f} is a finding of --full too`);
          }
          const totals = await s.db.selectFrom('usage_totals').select(['api_key_id', 'charged_usdc']).execute();
          const got = new Map(totals.map((t) => [Number(t.api_key_id), Number(t.charged_usdc)]));
          for (const [k, v] of charged) assert.equal(got.get(k) ?? 0, v, `step ${step}: key ${k} usage total`);
          const spend = await s.db.selectFrom('key_spend').select(['api_key_id', 'spent_usdc']).where('period', '=', 'total').execute();
          const spent = new Map(spend.map((t) => [Number(t.api_key_id), Number(t.spent_usdc)]));
          for (const [k, v] of charged) assert.equal(spent.get(k) ?? 0, v, `step ${step}: key ${k} total spend`);
        }
      }
      const full = await runLedgerCheck(s.db, { full: true });
      assert.deepEqual(full.problems, []);
      const inc = await runLedgerCheck(s.db, { full: false, now: now + 1 });
      assert.deepEqual(inc.problems, []);
      const left = await s.db
        .selectFrom('request_usage')
        .select((eb) => eb.fn.countAll().as('n'))
        .executeTakeFirstOrThrow();
      assert.ok(Number(left.n) < n / 2, `retention removed rows (${left.n} of ${n} left)`);
    });
  }
});
