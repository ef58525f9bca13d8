import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { applyMovement } from '../../src/ledger/movements.ts';
import { uptoHoldWallet } from '../../src/ledger/operations/upto-hold.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { MAXIMUM, pendingUpto } from '../support/upto-hold-fixtures.ts';

const DAY = 86_400_000;
const later = Date.now() + 2 * DAY;
const STRAY_DEBIT = "1 debits left an upto hold wallet other than by a request's charge or a release";

/**
 * Forged older-form releases (`adjustment`, reference `upto-release:<id>`) that do name something real: a
 * payment of another payer, a payment id with something after it, the prefix in other letters. Each takes
 * money out of a hold wallet; each must be a problem of the full and of the incremental check, whether or
 * not a payment's own sums read it.
 */
for (const engine of ENGINES) {
  describe(`attack: a forged older-form upto release naming a real payment (${engine})`, () => {
    const opened: Storage[] = [];
    after(async () => {
      for (const s of opened) await s.close();
    });

    async function fresh(): Promise<Storage> {
      const s = openStorage(await freshDatabaseUrl(engine));
      opened.push(s);
      await migrateToLatest(s);
      return s;
    }

    /** An upto payment held the older way (a `topup` to its hold wallet), still holding. */
    async function olderFormHolding(s: Storage): Promise<{ id: string; payer: string }> {
      const p = await pendingUpto(s);
      await s.db.transaction().execute(async (trx) => {
        await trx.updateTable('payments').set({ state: 'holding', status: 'credited', upto_state: 'holding' }).where('id', '=', p.id).execute();
        await applyMovement(trx, { wallet: uptoHoldWallet(p.payer), kind: 'topup', amountUsdc: MAXIMUM, reference: `payment:${p.id}` });
      });
      return p;
    }

    /** Takes 300 out of `payer`'s hold wallet with `reference`, after a checkpoint, and returns both checks' problems. */
    async function forge(s: Storage, payer: string, reference: string): Promise<{ full: string[]; incremental: string[] }> {
      const clean = await runLedgerCheck(s.db, { full: false, now: later });
      assert.deepEqual(clean.problems, []);
      assert.ok(clean.stored, 'a checkpoint before the forged entry');
      await s.db.transaction().execute((trx) => applyMovement(trx, { wallet: uptoHoldWallet(payer), kind: 'adjustment', amountUsdc: -300, reference }));
      const full = (await runLedgerCheck(s.db, { full: true })).problems;
      const incremental = await runLedgerCheck(s.db, { full: false, now: later + DAY });
      assert.ok(incremental.from, 'checked from the checkpoint');
      return { full, incremental: incremental.problems };
    }

    test("naming another payer's real upto payment: the stray debit is reported", async () => {
      const s = await fresh();
      const mine = await olderFormHolding(s);
      const theirs = await olderFormHolding(s);
      const { full, incremental } = await forge(s, mine.payer, `upto-release:${theirs.id}`);
      assert.ok(full.includes(STRAY_DEBIT), full.join('\n'));
      assert.ok(incremental.includes(STRAY_DEBIT), incremental.join('\n'));
    });

    test('naming its own payment with trailing junk: the stray debit is reported', async () => {
      const s = await fresh();
      const mine = await olderFormHolding(s);
      const { full, incremental } = await forge(s, mine.payer, `upto-release:${mine.id} `);
      assert.deepEqual(full, [STRAY_DEBIT]);
      assert.deepEqual(incremental, [STRAY_DEBIT]);
    });

    // SQLite's like ignores case: the capitals passed the debit rule while no payment's sums read them.
    test('naming its own payment with the prefix in capitals: reported (no payment reads it as its release)', async () => {
      const s = await fresh();
      const mine = await olderFormHolding(s);
      const { full, incremental } = await forge(s, mine.payer, `UPTO-RELEASE:${mine.id}`);
      assert.deepEqual(full, [STRAY_DEBIT]);
      assert.deepEqual(incremental, [STRAY_DEBIT]);
    });
  });
}
