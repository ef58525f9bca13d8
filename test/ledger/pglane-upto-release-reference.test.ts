import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { runLedgerCheck } from '../../src/ledger/checkpoints/run-check.ts';
import { applyMovement } from '../../src/ledger/movements.ts';
import { uptoHoldWallet } from '../../src/ledger/operations/upto-hold.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { MAXIMUM, pendingUpto, spend } from '../support/upto-hold-fixtures.ts';

const DAY = 86_400_000;
/** When the incremental checks run: every row written now belongs to a closed day. */
const later = Date.now() + 2 * DAY;
const STRAY_DEBIT = "1 debits left an upto hold wallet other than by a request's charge or a release";

/**
 * The older form of an upto release (rows written before migration 015): an `adjustment` out of
 * `<payer>#upto` with reference `upto-release:<payment id>`. The hold wallets' debit rule lets it
 * pass only when it names an upto payment whose hold wallet it left; naming no payment, it is money
 * taken out of a hold that no payment accounts for.
 */
for (const engine of ENGINES) {
  describe(`ledger-check: an older-form upto release must name its own payment (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    /** An upto payment held the older way (a `topup` to its hold wallet), still holding: no own-hold rule reads its wallet. */
    async function olderFormHolding(): Promise<{ id: string; payer: string }> {
      const p = await pendingUpto(s);
      await s.db.transaction().execute(async (trx) => {
        await trx.updateTable('payments').set({ state: 'holding', status: 'credited', upto_state: 'holding' }).where('id', '=', p.id).execute();
        await applyMovement(trx, { wallet: uptoHoldWallet(p.payer), kind: 'topup', amountUsdc: MAXIMUM, reference: `payment:${p.id}` });
      });
      return p;
    }

    test('the legitimate older-form release (its own payment, its own hold wallet) passes the full and the incremental check', async () => {
      const { id, payer } = await olderFormHolding();
      await spend(s, payer, 400);
      await s.db.transaction().execute(async (trx) => {
        await trx.updateTable('payments').set({ state: 'settling', upto_state: 'settling', settle_amount_atomic: '400' }).where('id', '=', id).execute();
        await applyMovement(trx, { wallet: uptoHoldWallet(payer), kind: 'adjustment', amountUsdc: -600, reference: `upto-release:${id}` });
      });
      assert.deepEqual((await runLedgerCheck(s.db, { full: true })).problems, []);
      assert.deepEqual((await runLedgerCheck(s.db, { full: false, now: later })).problems, []);
    });

    describe(`attack: an adjustment debit out of a hold wallet naming an upto payment that does not exist (${engine})`, () => {
      test('reported by the full check and by the incremental check from a checkpoint before it', async () => {
        const { payer } = await olderFormHolding();
        const clean = await runLedgerCheck(s.db, { full: false, now: later + DAY });
        assert.deepEqual(clean.problems, []);
        assert.ok(clean.stored, 'a checkpoint before the forged entry');
        // The balance moves with the entry (applyMovement): every other sum agrees; only the reference is a lie.
        await s.db
          .transaction()
          .execute((trx) =>
            applyMovement(trx, { wallet: uptoHoldWallet(payer), kind: 'adjustment', amountUsdc: -300, reference: `upto-release:${randomUUID()}` }),
          );
        assert.deepEqual((await runLedgerCheck(s.db, { full: true })).problems, [STRAY_DEBIT]);
        const incremental = await runLedgerCheck(s.db, { full: false, now: later + DAY });
        assert.ok(incremental.from, 'checked from the checkpoint');
        assert.deepEqual(incremental.problems, [STRAY_DEBIT]);
      });
    });
  });
}
