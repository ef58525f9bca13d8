import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { getBalance } from '../../src/ledger/balances.ts';
import { applyMovement } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { HoldInvariantError, holdUpto, releaseUpto, uptoHoldWallet } from '../../src/ledger/operations/upto-hold.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { fixCharge, holdMaximum } from '../../src/payments/upto/upto-store.ts';
import { isUniqueViolation } from '../../src/storage/constraint-errors.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { uptoLedgerKinds } from '../../src/storage/migrations/015-upto-ledger-kinds.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, newWallet, usageRecord } from '../support/ledger.ts';
import { entriesOf, MAXIMUM, PAYLOAD, pendingUpto, spend } from '../support/upto-hold-fixtures.ts';

const problemsOf = async (s: Storage) => (await checkLedger(s.db)).problems;

for (const engine of ENGINES) {
  describe(`upto hold and release are ledger operations of their own (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('a hold, a request on it, the fix: one upto_hold, one upto_release of the unspent part, and hold − release is what settles', async () => {
      const { id, payer } = await pendingUpto(s);
      assert.equal((await holdMaximum(s.db, id, PAYLOAD)).kind, 'held');
      await spend(s, payer, 250);
      assert.equal(await fixCharge(s.db, id), 'fixed');
      assert.deepEqual(await entriesOf(s, id), [
        ['upto_hold', MAXIMUM],
        ['upto_release', -750],
      ]);
      assert.deepEqual(await getBalance(s.db, uptoHoldWallet(payer)), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      const p = await s.db.selectFrom('payments').select(['upto_state', 'settle_amount_atomic']).where('id', '=', id).executeTakeFirstOrThrow();
      assert.deepEqual(p, { upto_state: 'settling', settle_amount_atomic: '250' });
      await assertLedgerConsistent(s.db);
    });

    test('a request that spent the whole maximum is still released once, of 0: every fixed charge has its release', async () => {
      const { id, payer } = await pendingUpto(s);
      await holdMaximum(s.db, id, PAYLOAD);
      await spend(s, payer, MAXIMUM);
      assert.equal(await fixCharge(s.db, id), 'fixed');
      assert.deepEqual(await entriesOf(s, id), [
        ['upto_hold', MAXIMUM],
        ['upto_release', 0],
      ]);
      await assertLedgerConsistent(s.db);
    });

    test('while the request runs the hold stays: nothing is released and the payment keeps holding', async () => {
      const { id, payer } = await pendingUpto(s);
      await holdMaximum(s.db, id, PAYLOAD);
      assert.equal(await reserve(s, { wallet: uptoHoldWallet(payer), apiKeyId: 1, requestId: `${id}-r`, amountUsdc: 400, leaseMs: 60_000 }), true);
      assert.equal(await fixCharge(s.db, id), 'running');
      assert.deepEqual(await entriesOf(s, id), [['upto_hold', MAXIMUM]]);
      await assertLedgerConsistent(s.db);
      await finishReservation(s, `${id}-r`, 400, usageRecord(`${id}-r`, uptoHoldWallet(payer)));
      assert.equal(await fixCharge(s.db, id), 'fixed');
      await assertLedgerConsistent(s.db);
    });

    test('rows written before migration 015 (a topup hold, an adjustment release or none for 0) still pass ledger-check', async () => {
      for (const unspent of [600, 0]) {
        const { id, payer } = await pendingUpto(s);
        await s.db.transaction().execute(async (trx) => {
          await trx.updateTable('payments').set({ state: 'holding', status: 'credited', upto_state: 'holding' }).where('id', '=', id).execute();
          await applyMovement(trx, { wallet: uptoHoldWallet(payer), kind: 'topup', amountUsdc: MAXIMUM, reference: `payment:${id}` });
        });
        await spend(s, payer, MAXIMUM - unspent);
        await s.db.transaction().execute(async (trx) => {
          await trx
            .updateTable('payments')
            .set({ state: 'settling', upto_state: 'settling', settle_amount_atomic: String(MAXIMUM - unspent) })
            .where('id', '=', id)
            .execute();
          const release = { wallet: uptoHoldWallet(payer), kind: 'adjustment' as const, amountUsdc: -unspent, reference: `upto-release:${id}` };
          if (unspent > 0) await applyMovement(trx, release);
        });
        assert.deepEqual(await problemsOf(s), []);
      }
    });

    test('migration 015: the new kinds are accepted, an unknown kind is refused, rows are kept exactly and the ledger stays append-only', async () => {
      const columns = ['id', 'wallet', 'kind', 'amount_usdc', 'reference', 'note', 'created_at'] as const;
      const before = await s.db.selectFrom('ledger_entries').select(columns).orderBy('id').execute();
      assert.ok(before.length > 0);
      // Applied again on the filled table: the SQLite rebuild copies every row as it is.
      await uptoLedgerKinds(engine).up(s.db);
      assert.deepEqual(await s.db.selectFrom('ledger_entries').select(columns).orderBy('id').execute(), before);
      const wallet = newWallet();
      await s.db.transaction().execute((trx) => applyMovement(trx, { wallet, kind: 'adjustment', amountUsdc: 5, reference: `after-015:${wallet}` }));
      const last = await s.db.selectFrom('ledger_entries').select('id').where('reference', '=', `after-015:${wallet}`).executeTakeFirstOrThrow();
      assert.ok(Number(last.id) > Number(before.at(-1)!.id), 'ids continue after the rebuilt table');
      const entry = { wallet, amount_usdc: 0, reference: null, note: null, created_at: 1 };
      await assert.rejects(
        s.db
          .insertInto('ledger_entries')
          .values({ ...entry, kind: 'gift' as 'charge' })
          .execute(),
        /ledger_kind_known|constraint/i,
      );
      await assert.rejects(sql`update ledger_entries set amount_usdc = 0`.execute(s.db), /append-only/);
      await assert.rejects(sql`delete from ledger_entries`.execute(s.db), /append-only/);
      await s.db
        .insertInto('ledger_entries')
        .values({ ...entry, kind: 'upto_release', reference: `kind-check:${wallet}` })
        .execute();
      assert.deepEqual(await problemsOf(s), [`1 upto hold or release entries belong to no upto payment's hold wallet`]);
    });
  });

  describe(`attack: upto holds and releases out of turn (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    async function fixed(charge: number) {
      const held = await pendingUpto(s);
      await holdMaximum(s.db, held.id, PAYLOAD);
      await spend(s, held.payer, charge);
      assert.equal(await fixCharge(s.db, held.id), 'fixed');
      return held;
    }

    test('a release applied twice is refused loudly and moves nothing; the fix again changes nothing', async () => {
      const { id, payer } = await fixed(300);
      await assert.rejects(
        s.db.transaction().execute((trx) => releaseUpto(trx, id, 0, Date.now())),
        HoldInvariantError,
      );
      await assert.rejects(
        s.db.transaction().execute((trx) => releaseUpto(trx, id, 700, Date.now())),
        HoldInvariantError,
      );
      assert.equal(await fixCharge(s.db, id), 'not-holding');
      assert.deepEqual(await entriesOf(s, id), [
        ['upto_hold', MAXIMUM],
        ['upto_release', -700],
      ]);
      assert.equal((await getBalance(s.db, uptoHoldWallet(payer))).balance_usdc, 0);
      await assertLedgerConsistent(s.db);
    });

    test('a release while the payment still holds, or of more than the hold wallet has, is refused', async () => {
      const { id, payer } = await pendingUpto(s);
      await holdMaximum(s.db, id, PAYLOAD);
      await assert.rejects(
        s.db.transaction().execute((trx) => releaseUpto(trx, id, MAXIMUM, Date.now())),
        /only a payment whose charge is fixed/,
      );
      await spend(s, payer, 100);
      const outcome = s.db.transaction().execute(async (trx) => {
        await trx.updateTable('payments').set({ state: 'settling', upto_state: 'settling', settle_amount_atomic: '0' }).where('id', '=', id).execute();
        await releaseUpto(trx, id, MAXIMUM, Date.now());
      });
      await assert.rejects(outcome, HoldInvariantError);
      assert.deepEqual(await entriesOf(s, id), [['upto_hold', MAXIMUM]]);
      assert.equal(await fixCharge(s.db, id), 'fixed');
      await assertLedgerConsistent(s.db);
    });

    test('a hold for a payment already released is refused, even when its row is tampered back to holding', async () => {
      const { id } = await fixed(200);
      await assert.rejects(
        s.db.transaction().execute((trx) => holdUpto(trx, id, 'again', Date.now())),
        /not credited\/holding/,
      );
      await assert.rejects(holdMaximum(s.db, id, PAYLOAD), /no longer pending/);
      await s.db.updateTable('payments').set({ state: 'holding', upto_state: 'holding' }).where('id', '=', id).execute();
      await assert.rejects(
        s.db.transaction().execute((trx) => holdUpto(trx, id, 'again', Date.now())),
        (err) => isUniqueViolation(err),
      );
      assert.deepEqual(await entriesOf(s, id), [
        ['upto_hold', MAXIMUM],
        ['upto_release', -800],
      ]);
      // The tampered row itself is what ledger-check then names.
      assert.deepEqual(await problemsOf(s), [`upto payment ${id}: released 1 times while its request still holds the maximum`]);
      await s.db.updateTable('payments').set({ state: 'settling', upto_state: 'settling' }).where('id', '=', id).execute();
      await assertLedgerConsistent(s.db);
    });

    test('a crash between the hold and the state write leaves neither, and the payment is then held exactly once', async () => {
      const { id, payer } = await pendingUpto(s);
      // A hold written before its state: refused, whatever the order a caller tries.
      await assert.rejects(
        s.db.transaction().execute((trx) => holdUpto(trx, id, 'early', Date.now())),
        /not credited\/holding/,
      );
      // The state written and the maximum held, then the process dies before the commit.
      const crash = new Error('killed before commit');
      const died = s.db.transaction().execute(async (trx) => {
        await trx.updateTable('payments').set({ state: 'holding', status: 'credited', upto_state: 'holding' }).where('id', '=', id).execute();
        await holdUpto(trx, id, 'x402 upto hold', Date.now());
        throw crash;
      });
      await assert.rejects(died, (err) => err === crash);
      assert.deepEqual(await entriesOf(s, id), []);
      assert.equal((await s.db.selectFrom('payments').select('status').where('id', '=', id).executeTakeFirstOrThrow()).status, 'pending');
      assert.equal((await holdMaximum(s.db, id, PAYLOAD)).kind, 'held');
      assert.deepEqual(await entriesOf(s, id), [['upto_hold', MAXIMUM]]);
      assert.equal((await getBalance(s.db, uptoHoldWallet(payer))).balance_usdc, MAXIMUM);
      await assertLedgerConsistent(s.db);
    });

    test('ledger-check names a fixed charge with no release, and a hold wallet credited other than by a hold', async () => {
      const { id, payer } = await pendingUpto(s);
      await holdMaximum(s.db, id, PAYLOAD);
      await spend(s, payer, MAXIMUM);
      // What a state write without its release (two transactions, one lost) would leave.
      await s.db
        .updateTable('payments')
        .set({ state: 'settling', upto_state: 'settling', settle_amount_atomic: String(MAXIMUM) })
        .where('id', '=', id)
        .execute();
      assert.deepEqual(await problemsOf(s), [`upto payment ${id}: released 0 times once its charge was fixed, expected once`]);
      await s.db.transaction().execute((trx) => releaseUpto(trx, id, 0, Date.now()));
      const gift = { wallet: uptoHoldWallet(payer), kind: 'adjustment' as const, amountUsdc: 5, reference: `gift:${id}` };
      await s.db.transaction().execute((trx) => applyMovement(trx, gift));
      const problems = await problemsOf(s);
      assert.ok(problems.includes('1 credits entered an upto hold wallet other than by a hold'), problems.join('\n'));
    });
  });
}
