import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Kysely } from 'kysely';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { paymentStateProblems } from '../../src/ledger/payment-state-check.ts';
import {
  creditPayment,
  findPayment,
  ledgerReference,
  markSubmitted,
  reclaimFailed,
  RELEASED_UNSENT,
  releaseDropped,
  releaseRefused,
  releaseUnavailable,
  releaseUnsent,
  UNAVAILABLE_DURING_SETTLE,
  UNAVAILABLE_DURING_VERIFY,
} from '../../src/payments/payment-store.ts';
import { transition, TransitionRefused } from '../../src/payments/states.ts';
import { reopenUnsettled, writeOff } from '../../src/payments/upto/upto-store.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateTo, migrateToLatest } from '../../src/storage/migrate.ts';
import type { Database, PaymentState } from '../../src/storage/schema.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { insertPaymentBefore014, randomTx, recordedPayment } from '../support/payment-rows.ts';
import { stateWritesIn } from './state-writers.test.ts';

/**
 * Adversarial review of the payment state machine (src/payments/states.ts, migration 014): replays,
 * races between requests, reconcilers and the operator, transitions the table must refuse, the
 * back-fill of odd rows, and the guard that keeps state writes in one place.
 */

const topupCredits = async (db: Kysely<Database>, id: string) =>
  Number(
    (
      await db
        .selectFrom('ledger_entries')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('kind', '=', 'topup')
        .where('reference', '=', ledgerReference(id))
        .executeTakeFirstOrThrow()
    ).n,
  );

/** Walks a fresh payment along `path` (each step a listed transition), as the request and reconciler would. */
async function paymentIn(db: Kysely<Database>, path: PaymentState[]): Promise<string> {
  const id = await recordedPayment(db);
  let at: PaymentState = 'pending';
  for (const to of path) {
    const release = to === 'released' ? { release: 'never_sent' as const } : {};
    assert.equal(await transition(db, id, at, to, release), 'moved');
    at = to;
  }
  return id;
}

for (const engine of ENGINES) {
  describe(`attack: races and replays on the payment state machine (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('two instances credit the same payment at once: one credit, the other a no-op', async () => {
      const id = await recordedPayment(s.db);
      const tx = randomTx();
      const rows = await Promise.all([0, 1, 2, 3].map(() => creditPayment(s.db, id, tx, 1_000_000n)));
      assert.deepEqual(new Set(rows.map((r) => r.state)), new Set(['credited']));
      assert.equal(await topupCredits(s.db, id), 1);
      assert.deepEqual((await checkLedger(s.db)).problems, []);
    });

    test('two replays reclaim the same released payment at once: exactly one owns the attempt', async () => {
      const id = await recordedPayment(s.db);
      await releaseUnavailable(s.db, id, UNAVAILABLE_DURING_SETTLE);
      const claims = await Promise.all([0, 1, 2, 3].map(() => reclaimFailed(s.db, id, Date.now())));
      assert.equal(claims.filter((c) => c !== null).length, 1);
      assert.equal((await findPayment(s.db, id)).state, 'pending');
    });

    test('a replay never reopens a payment past released/failed: credited, holding, settling, settled, unsettled, written off', async () => {
      const paths: PaymentState[][] = [
        ['credited'],
        ['holding'],
        ['holding', 'settling'],
        ['holding', 'settling', 'settled'],
        ['holding', 'settling', 'unsettled'],
        ['holding', 'settling', 'unsettled', 'written_off'],
      ];
      for (const path of paths) {
        const id = await paymentIn(s.db, path);
        assert.equal(await reclaimFailed(s.db, id, Date.now()), null, path.join('>'));
        assert.equal((await findPayment(s.db, id)).state, path.at(-1));
      }
    });

    test('the reconciler releases a stale unsent payment while its request sends it: the sent hash wins either way', async () => {
      // Reconciler first: the late send's hash moves the released row back to submitted, watched again.
      const a = await recordedPayment(s.db);
      const staleA = await findPayment(s.db, a);
      assert.equal(await releaseUnsent(s.db, staleA), true);
      const txA = randomTx();
      assert.equal(await markSubmitted(s.db, a, txA), true);
      assert.deepEqual(
        [(await findPayment(s.db, a)).state, (await findPayment(s.db, a)).tx_hash, (await findPayment(s.db, a)).release_kind],
        ['submitted', txA, null],
      );
      // Request first: the reconciler's stale read no longer matches, nothing is released.
      const b = await recordedPayment(s.db);
      const staleB = await findPayment(s.db, b);
      await markSubmitted(s.db, b, randomTx(), Number(staleB.updated_at) + 1);
      assert.equal(await releaseUnsent(s.db, staleB), false);
      assert.equal((await findPayment(s.db, b)).state, 'submitted');
    });

    test('a released payment whose authorization expired is still credited once when the chain shows it arrived', async () => {
      const id = await recordedPayment(s.db); // valid_before 0: long expired
      await releaseUnsent(s.db, await findPayment(s.db, id));
      const tx = randomTx();
      assert.equal((await creditPayment(s.db, id, tx, 1_000_000n)).state, 'credited');
      // A late replay of the same payment after the credit: nothing reopens, nothing more is credited.
      assert.equal(await reclaimFailed(s.db, id, Date.now()), null);
      assert.equal((await creditPayment(s.db, id, randomTx(), 1_000_000n)).state, 'credited');
      assert.equal(await topupCredits(s.db, id), 1);
      // Rows walked by paymentIn carry no ledger entries of their own: only this payment's problems count.
      assert.deepEqual(
        (await checkLedger(s.db)).problems.filter((p) => p.includes(id)),
        [],
      );
    });

    test('a payment failed because the chain moved another amount stays named after a replay meets a facilitator outage', async () => {
      const id = await recordedPayment(s.db); // valid_before 0: its authorization was used, it can never settle again
      assert.equal((await creditPayment(s.db, id, randomTx(), 999_999n)).state, 'failed');
      // The same payment sent again: its authorization was used on chain, so the reopen (failed -> pending) is
      // refused; a facilitator outage during verify (settle-topup.ts settleClaimed) then finds nothing to release.
      assert.equal(await reclaimFailed(s.db, id, Date.now()), null);
      await releaseUnavailable(s.db, id, UNAVAILABLE_DURING_VERIFY);
      const row = await findPayment(s.db, id);
      // ledger-check --chain skips rows with an on-chain amount (their reason says it), the
      // reconciler watches only released rows still valid: the reason is all that names it.
      assert.equal(row.onchain_amount_atomic, '999999');
      assert.match(row.failure_reason ?? '', /the chain shows 999999 token units/, `state ${row.state}, reason ${row.failure_reason}`);
    });

    test("a stale request's refused send does not release the live attempt of a replay that took the payment over", async () => {
      const id = await recordedPayment(s.db);
      const claimedA = await findPayment(s.db, id);
      const hashA = randomTx();
      await markSubmitted(s.db, id, hashA); // A: hash recorded before its (hanging) broadcast
      const stale = await findPayment(s.db, id);
      assert.equal(await releaseDropped(s.db, stale, Number(stale.updated_at) + 1), true); // the reconciler: unknown to the node
      assert.notEqual(await reclaimFailed(s.db, id, Date.now()), null); // B: the same payment sent again
      const hashB = randomTx();
      await markSubmitted(s.db, id, hashB); // B's transaction is on its way
      assert.equal(await releaseRefused(s.db, claimedA, hashA), false); // A's broadcast is refused at last
      const row = await findPayment(s.db, id);
      assert.deepEqual([row.state, row.tx_hash], ['submitted', hashB]);
    });

    test('the operator writes off an unsettled upto payment while the reconciler retries it: exactly one wins', async () => {
      for (let round = 0; round < 4; round++) {
        const id = await paymentIn(s.db, ['holding', 'settling', 'unsettled']);
        const [wrote, retried] = await Promise.all([writeOff(s.db, id, 'lost'), reopenUnsettled(s.db, id)]);
        assert.equal(Number(wrote) + Number(retried), 1);
        assert.equal((await findPayment(s.db, id)).state, wrote ? 'written_off' : 'settling');
      }
    });

    test('moves the table does not list are refused before any SQL', async () => {
      const refused: [PaymentState[], PaymentState][] = [
        [['credited'], 'pending'],
        [['credited'], 'failed'],
        [['credited'], 'released'],
        [['holding', 'settling', 'settled'], 'settling'],
        [['holding'], 'credited'],
        [['released'], 'released'],
        [['holding', 'settling', 'unsettled', 'written_off'], 'unsettled'],
      ];
      for (const [path, to] of refused) {
        const id = await paymentIn(s.db, path);
        const release = to === 'released' ? { release: 'dropped' as const } : {};
        await assert.rejects(transition(s.db, id, path.at(-1)!, to, release), TransitionRefused, `${path.at(-1)} -> ${to}`);
        assert.equal((await findPayment(s.db, id)).state, path.at(-1));
      }
    });
  });

  describe(`attack: migration 014 back-fill of odd rows (${engine})`, () => {
    let s: Storage;
    const rows = [
      // A let-go text in another case or with a trailing space was never released by the old exact match either.
      { id: 'case', status: 'failed', upto: null, reason: RELEASED_UNSENT.toUpperCase(), state: 'failed' },
      { id: 'space', status: 'failed', upto: null, reason: `${UNAVAILABLE_DURING_SETTLE} `, state: 'failed' },
      // An upto row whose reason is a let-go text keeps its upto state: it holds money, it is not released.
      { id: 'upto-text', status: 'credited', upto: 'unsettled', reason: UNAVAILABLE_DURING_SETTLE, state: 'unsettled' },
      // status and upto_state disagreeing: upto_state wins, and ledger-check names the row.
      { id: 'disagree', status: 'failed', upto: 'settled', reason: RELEASED_UNSENT, state: 'settled' },
    ];
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateTo(s, '013-upto-payments');
      const db = s.db as Kysely<any>;
      for (const [i, r] of rows.entries()) {
        await insertPaymentBefore014(db, { ...r, payer: `0x${(i + 1).toString(16).padStart(40, '0')}`, createdAt: Date.now() + i });
      }
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('odd rows get the state their money says, never released from a lookalike text', async () => {
      const got = await s.db.selectFrom('payments').select(['id', 'state', 'release_kind']).execute();
      assert.deepEqual(Object.fromEntries(got.map((r) => [r.id, [r.state, r.release_kind]])), Object.fromEntries(rows.map((r) => [r.id, [r.state, null]])));
      assert.deepEqual(
        (await paymentStateProblems(s.db)).map((p) => p.split(' ')[1]),
        ['disagree'],
      );
    });
  });
}

describe('attack: a state write the writers guard does not see', () => {
  test('the guard sees every form of payments state write Kysely and raw SQL allow', () => {
    const planted = [
      "await db.updateTable('payments').set('status', 'failed').where('id', '=', id).execute();",
      "const fields = { state: 'credited' }; await db.updateTable('payments').set(fields).execute();",
      "await db.updateTable('payments').set(() => ({ upto_state: 'settled' })).execute();",
      'await sql`update "payments" set "state" = ${s} where id = ${id}`.execute(db);',
      "await sql`insert into payments (id, state) values (${id}, 'credited')`.execute(db);",
      "await db.updateTable('payments as p').set({ 'p.status': 'failed' }).where('p.id', '=', id).execute();",
    ].join('\n');
    assert.deepEqual(
      stateWritesIn('src/x.ts', planted).map((w) => w.split(':')[1]),
      ['1', '2', '3', '4', '5', '6'],
    );
  });
});
