import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { getBalance } from '../../src/ledger/balances.ts';
import { applyMovement } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { uptoHoldWallet } from '../../src/ledger/operations/upto-hold.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { fixCharge, holdMaximum } from '../../src/payments/upto/upto-store.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateTo, migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, newWallet, usageRecord } from '../support/ledger.ts';
import { entriesOf, MAXIMUM, PAYLOAD, pendingUpto, spend } from '../support/upto-hold-fixtures.ts';

/**
 * Adversarial review of the upto hold and release as ledger operations (upto-hold.ts): replays,
 * reorders, two payments of one payer, crashes, the migration on a filled database, tampered rows.
 * Tests marked todo are breaks found by the review: each asserts the right outcome and fails today.
 */

const settleOf = async (s: Storage, id: string) =>
  s.db.selectFrom('payments').select(['upto_state', 'settle_amount_atomic']).where('id', '=', id).executeTakeFirstOrThrow();

/**
 * Payment A's request answered during an outage: its settle spooled, its reservation swept when the
 * lease ran out, the reconciler then fixed A's charge at 0. Returns the spooled settle, not yet applied.
 */
async function sweptAndFixed(s: Storage, payer: string, charge: number) {
  const a = await pendingUpto(s, payer);
  assert.equal((await holdMaximum(s.db, a.id, PAYLOAD)).kind, 'held');
  const requestId = randomUUID();
  const wallet = uptoHoldWallet(payer);
  const now = Date.now();
  assert.equal(await reserve(s, { wallet, apiKeyId: 1, requestId, amountUsdc: MAXIMUM, leaseMs: 1_000 }, now - 10_000), true);
  assert.equal(await sweepExpiredReservations(s.db, now), 1);
  assert.equal(await fixCharge(s.db, a.id), 'fixed');
  assert.deepEqual(await settleOf(s, a.id), { upto_state: 'settling', settle_amount_atomic: '0' });
  // A's charge of 0 sends nothing; the payment is closed and its payer free for the next one.
  await s.db.updateTable('payments').set({ state: 'settled', upto_state: 'settled', onchain_amount_atomic: '0' }).where('id', '=', a.id).execute();
  return { a, spooled: { requestId, wallet, chargeUsdc: charge, usage: usageRecord(requestId, wallet) } };
}

for (const engine of ENGINES) {
  describe(`attack: upto holds replayed, reordered, raced (${engine})`, () => {
    let s: Storage;
    let url: string;
    before(async () => {
      url = await freshDatabaseUrl(engine);
      s = openStorage(url);
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('two instances fix the same charge at once: one fix, one release, the settle amount the request charged', async () => {
      // Two instances share a database on PostgreSQL; SQLite has one process, racing its own calls.
      const other = engine === 'postgres' ? openStorage(url) : s;
      try {
        const { id, payer } = await pendingUpto(s);
        await holdMaximum(s.db, id, PAYLOAD);
        await spend(s, payer, 300);
        const outcomes = await Promise.all([s, other, s, other, s, other].map((st) => fixCharge(st.db, id)));
        assert.deepEqual(outcomes.filter((o) => o === 'fixed').length, 1, outcomes.join());
        assert.deepEqual(
          outcomes.filter((o) => o !== 'fixed'),
          Array(5).fill('not-holding'),
        );
        assert.deepEqual(await entriesOf(s, id), [
          ['upto_hold', MAXIMUM],
          ['upto_release', -700],
        ]);
        assert.deepEqual(await settleOf(s, id), { upto_state: 'settling', settle_amount_atomic: '300' });
        await assertLedgerConsistent(s.db);
      } finally {
        if (other !== s) await other.close();
      }
    });

    test('one pending payment held twice at once (two instances): held once', async () => {
      // Two instances share a database on PostgreSQL; SQLite has one process, racing its own calls.
      const other = engine === 'postgres' ? openStorage(url) : s;
      try {
        const { id, payer } = await pendingUpto(s);
        const outcomes = await Promise.allSettled([holdMaximum(s.db, id, PAYLOAD), holdMaximum(other.db, id, PAYLOAD)]);
        assert.equal(outcomes.filter((o) => o.status === 'fulfilled' && o.value.kind === 'held').length, 1);
        const refused = outcomes.find((o) => o.status === 'rejected');
        assert.match(String((refused as PromiseRejectedResult).reason), /no longer pending/);
        assert.deepEqual(await entriesOf(s, id), [['upto_hold', MAXIMUM]]);
        assert.equal((await getBalance(s.db, uptoHoldWallet(payer))).balance_usdc, MAXIMUM);
        await assertLedgerConsistent(s.db);
      } finally {
        if (other !== s) await other.close();
      }
    });

    test('two payments of one payer held at once: one holds, the other is busy and holds nothing', async () => {
      const payer = newWallet();
      const [a, b] = [await pendingUpto(s, payer), await pendingUpto(s, payer)];
      const outcomes = await Promise.all([holdMaximum(s.db, a.id, PAYLOAD), holdMaximum(s.db, b.id, PAYLOAD)]);
      assert.deepEqual(outcomes.map((o) => o.kind).sort(), ['busy', 'held']);
      assert.equal((await getBalance(s.db, uptoHoldWallet(payer))).balance_usdc, MAXIMUM);
      assert.equal((await entriesOf(s, a.id)).length + (await entriesOf(s, b.id)).length, 1);
      await assertLedgerConsistent(s.db);
    });

    test('two payments of one payer back to back: B is busy while A settles, then holds its own maximum from 0', async () => {
      const payer = newWallet();
      const a = await pendingUpto(s, payer);
      await holdMaximum(s.db, a.id, PAYLOAD);
      await spend(s, payer, 400);
      assert.equal(await fixCharge(s.db, a.id), 'fixed');
      const b = await pendingUpto(s, payer);
      assert.equal((await holdMaximum(s.db, b.id, PAYLOAD)).kind, 'busy');
      assert.deepEqual(await entriesOf(s, b.id), []);
      await s.db.updateTable('payments').set({ state: 'settled', upto_state: 'settled', onchain_amount_atomic: '400' }).where('id', '=', a.id).execute();
      const again = await pendingUpto(s, payer);
      assert.equal((await holdMaximum(s.db, again.id, PAYLOAD)).kind, 'held');
      await spend(s, payer, 150);
      assert.equal(await fixCharge(s.db, again.id), 'fixed');
      assert.deepEqual([(await settleOf(s, a.id)).settle_amount_atomic, (await settleOf(s, again.id)).settle_amount_atomic], ['400', '150']);
      await assertLedgerConsistent(s.db);
    });

    test('the fix dies before its commit (its release refused): the payment still holds, no amount to settle written', async () => {
      const { id, payer } = await pendingUpto(s);
      await holdMaximum(s.db, id, PAYLOAD);
      await spend(s, payer, 100);
      // A release row already there (a tampered or replayed row) makes releaseUpto throw after the state write.
      const replayed = { wallet: uptoHoldWallet(payer), kind: 'upto_release' as const, amount_usdc: 0, reference: `payment:${id}`, created_at: 1 };
      await s.db.insertInto('ledger_entries').values(replayed).execute();
      await assert.rejects(fixCharge(s.db, id), /released already/);
      assert.deepEqual(await settleOf(s, id), { upto_state: 'holding', settle_amount_atomic: null });
      assert.equal((await getBalance(s.db, uptoHoldWallet(payer))).balance_usdc, 900);
    });

    test('a late charge for a payment already fixed, with no other hold open: nothing taken from anyone, the shortfall recorded', async () => {
      const payer = newWallet();
      const { spooled } = await sweptAndFixed(s, payer, 300);
      const late = await applySettle(s, spooled);
      assert.equal(late.kind, 'late');
      assert.deepEqual(late.kind === 'late' && [late.outcome.chargedUsdc, late.outcome.shortfallUsdc], [0, 300]);
      assert.equal((await getBalance(s.db, uptoHoldWallet(payer))).balance_usdc, 0);
      const check = await checkLedger(s.db);
      assert.ok(
        check.findings.some((f) => f.includes(spooled.requestId)),
        check.findings.join('\n'),
      );
    });
  });

  describe(`attack: payment A's late charge and payment B's hold (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test("A's late charge arriving while B holds is not taken from B's hold: B settles only what B's request used", async () => {
      const payer = newWallet();
      const { spooled } = await sweptAndFixed(s, payer, 300);
      const b = await pendingUpto(s, payer);
      assert.equal((await holdMaximum(s.db, b.id, PAYLOAD)).kind, 'held');
      // B's request reserved its maximum and finished for 200; between that finish and B's fix
      // (settleUpto right after the answer, or the reconciler) the outage ends and A's spooled settle arrives.
      await spend(s, payer, 200);
      const late = await applySettle(s, spooled);
      assert.equal(await fixCharge(s.db, b.id), 'fixed');
      const problems = (await checkLedger(s.db)).problems;
      assert.deepEqual(
        { aLateCharged: late.kind === 'late' ? late.outcome.chargedUsdc : late.kind, bSettles: (await settleOf(s, b.id)).settle_amount_atomic, problems },
        { aLateCharged: 0, bSettles: '200', problems: [] },
      );
    });

    test("A's late charge arriving while B holds leaves B's request its reservation of the whole maximum", async () => {
      const payer = newWallet();
      const { spooled } = await sweptAndFixed(s, payer, 300);
      const b = await pendingUpto(s, payer);
      await holdMaximum(s.db, b.id, PAYLOAD);
      await applySettle(s, spooled);
      const wallet = uptoHoldWallet(payer);
      const reserved = await reserve(s, { wallet, apiKeyId: 1, requestId: randomUUID(), amountUsdc: MAXIMUM, leaseMs: 60_000 });
      // The upto path throws "the upto hold did not cover its own reservation"; its finally settles B anyway.
      if (!reserved) await fixCharge(s.db, b.id);
      assert.deepEqual({ reserved, bSettles: (await settleOf(s, b.id)).settle_amount_atomic }, { reserved: true, bSettles: null });
    });
  });

  describe(`attack: ledger-check and tampered hold wallets (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    for (const kind of ['adjustment', 'charge'] as const) {
      test(`a debit (${kind}) on a holding wallet, not by its request, is a ledger-check problem`, async () => {
        const { id, payer } = await pendingUpto(s);
        await holdMaximum(s.db, id, PAYLOAD);
        await spend(s, payer, 100);
        // Between the request's finish and the fix: 300 more taken from what the request left.
        const debit = { wallet: uptoHoldWallet(payer), kind, amountUsdc: -300, reference: `tampered:${id}` };
        await s.db.transaction().execute((trx) => applyMovement(trx, debit));
        assert.equal(await fixCharge(s.db, id), 'fixed');
        const problems = (await checkLedger(s.db)).problems;
        assert.equal((await settleOf(s, id)).settle_amount_atomic, '400');
        assert.ok(problems.length > 0, 'ledger-check found nothing');
      });
    }

    test('a hold wallet credited other than by a hold, a release elsewhere, a second release, a stray hold: each named', async () => {
      const { id, payer } = await pendingUpto(s);
      await holdMaximum(s.db, id, PAYLOAD);
      await spend(s, payer, 100);
      await fixCharge(s.db, id);
      // Rows written past the operations (amounts of 0, so the wallets' own sums stay as they were).
      const entry = async (wallet: string, kind: 'adjustment' | 'topup' | 'upto_hold', reference: string) => {
        const empty = { address: wallet, balance_usdc: 0, locked_usdc: 0, created_at: 1, updated_at: 1 };
        await s.db
          .insertInto('wallets')
          .values(empty)
          .onConflict((oc) => oc.doNothing())
          .execute();
        await s.db.insertInto('ledger_entries').values({ wallet, kind, amount_usdc: 0, reference, created_at: 1 }).execute();
      };
      const tampered: [string, () => Promise<unknown>, RegExp][] = [
        ['an older-form release too', () => entry(uptoHoldWallet(payer), 'adjustment', `upto-release:${id}`), /released 2 times once its charge was fixed/],
        ['a topup hold too, to the payer', () => entry(payer, 'topup', `payment:${id}`), /held 2 times/],
        ['a hold of no upto payment', () => entry(uptoHoldWallet(payer), 'upto_hold', `payment:${randomUUID()}`), /belong to no upto payment/],
      ];
      for (const [what, tamper, expected] of tampered) {
        await tamper();
        const problems = (await checkLedger(s.db)).problems;
        assert.ok(
          problems.some((p) => expected.test(p)),
          `${what}: ${problems.join('\n')}`,
        );
      }
    });
  });

  describe(`attack: migrations 014 to 017 on a filled database with older-form upto rows (${engine})`, () => {
    test('every row kept exactly, ids continuing, indexes and append-only triggers back, older rows still pass ledger-check', async () => {
      const s = openStorage(await freshDatabaseUrl(engine));
      try {
        await migrateTo(s, '013-upto-payments');
        // Older-form upto rows: a fixed payment (topup hold, adjustment release) and one still holding.
        const fixed = await pendingUpto(s, undefined, true);
        await s.db.transaction().execute(async (trx) => {
          await trx.updateTable('payments').set({ status: 'credited', upto_state: 'settling', settle_amount_atomic: '0' }).where('id', '=', fixed.id).execute();
          await applyMovement(trx, { wallet: uptoHoldWallet(fixed.payer), kind: 'topup', amountUsdc: MAXIMUM, reference: `payment:${fixed.id}` });
          await applyMovement(trx, { wallet: uptoHoldWallet(fixed.payer), kind: 'adjustment', amountUsdc: -MAXIMUM, reference: `upto-release:${fixed.id}` });
        });
        const holding = await pendingUpto(s, undefined, true);
        await s.db.transaction().execute(async (trx) => {
          await trx.updateTable('payments').set({ status: 'credited', upto_state: 'holding' }).where('id', '=', holding.id).execute();
          await applyMovement(trx, { wallet: uptoHoldWallet(holding.payer), kind: 'topup', amountUsdc: MAXIMUM, reference: `payment:${holding.id}` });
        });
        // Many ordinary rows (manual adjustments of 1 each, NULL references) on one wallet.
        const bulk = newWallet();
        const rows = 20_000;
        await s.db.insertInto('wallets').values({ address: bulk, balance_usdc: rows, locked_usdc: 0, created_at: 1, updated_at: 1 }).execute();
        for (let i = 0; i < rows; i += 500) {
          const row = (n: number) => ({ wallet: bulk, kind: 'adjustment' as const, amount_usdc: 1, reference: null, note: `n${n}`, created_at: n });
          const chunk = Array.from({ length: 500 }, (_, j) => row(i + j));
          await s.db.insertInto('ledger_entries').values(chunk).execute();
        }
        const columns = ['id', 'wallet', 'kind', 'amount_usdc', 'reference', 'note', 'created_at'] as const;
        const before = await s.db.selectFrom('ledger_entries').select(columns).orderBy('id').execute();
        // 018 (channels) rebuilds the ledger's kind CHECK once more on SQLite: the older rows must survive it too.
        assert.deepEqual((await migrateToLatest(s)).applied, [
          '014-payment-state',
          '015-upto-ledger-kinds',
          '016-retention',
          '017-reservation-upto-payment',
          '018-channels',
          '019-checkpoint-periods',
          '020-payment-request-digest',
          '021-channel-spent-vouchers',
        ]);
        assert.deepEqual(await s.db.selectFrom('ledger_entries').select(columns).orderBy('id').execute(), before);
        await assertLedgerConsistent(s.db);
        // The older holding payment is fixed by today's code: the new-form release next to the older-form hold.
        await spend(s, holding.payer, 250);
        assert.equal(await fixCharge(s.db, holding.id), 'fixed');
        assert.deepEqual(await entriesOf(s, holding.id), [
          ['topup', MAXIMUM],
          ['upto_release', -750],
        ]);
        await assertLedgerConsistent(s.db);
        const last = await s.db.selectFrom('ledger_entries').select('id').orderBy('id', 'desc').executeTakeFirstOrThrow();
        assert.ok(Number(last.id) > Number(before.at(-1)!.id));
        await assert.rejects(sql`delete from ledger_entries where wallet = ${bulk}`.execute(s.db), /append-only/);
        await assert.rejects(
          s.db
            .insertInto('ledger_entries')
            .values({ wallet: bulk, kind: 'upto_release', amount_usdc: 0, reference: `payment:${holding.id}`, created_at: 1 })
            .execute(),
          /unique|duplicate/i,
        );
      } finally {
        await s.close();
      }
    });
  });
}
