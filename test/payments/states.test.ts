import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  creditPayment,
  findPayment,
  isReleased,
  markSubmitted,
  reclaimFailed,
  releaseDropped,
  releaseRefused,
  releaseUnavailable,
  releaseUnsent,
  UNAVAILABLE_DURING_SETTLE,
} from '../../src/payments/payment-store.ts';
import { isAllowed, PAYMENT_STATES, TRANSITIONS } from '../../src/ledger/payment-states.ts';
import { transition, TransitionRefused } from '../../src/payments/states.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { PaymentState } from '../../src/storage/schema.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { randomTx, recordedPayment } from '../support/payment-rows.ts';

describe('the payment state table', () => {
  test('every transition names known states and at least one trigger; final states lead nowhere', () => {
    const states = Object.keys(PAYMENT_STATES) as PaymentState[];
    for (const [name, t] of Object.entries(TRANSITIONS)) {
      assert.ok(states.includes(t.to), name);
      for (const f of t.from) assert.ok(states.includes(f), `${name}: ${f}`);
      assert.ok(t.by.length > 0, name);
    }
    for (const final of ['credited', 'settled'] as const)
      assert.deepEqual(
        states.filter((to) => isAllowed(final, to)),
        [],
      );
    // Every state but the initial one is reachable.
    for (const s of states.filter((x) => x !== 'pending'))
      assert.ok(
        states.some((from) => isAllowed(from, s)),
        s,
      );
  });
});

for (const engine of ENGINES) {
  describe(`the guarded transition (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    test('refuses a move the table does not list, before any SQL, and a release without its kind', async () => {
      const id = await recordedPayment(s.db);
      await assert.rejects(transition(s.db, id, 'pending', 'settled'), TransitionRefused);
      await assert.rejects(transition(s.db, id, ['pending', 'credited'], 'pending'), TransitionRefused);
      await assert.rejects(transition(s.db, id, 'pending', 'released'), TransitionRefused);
      await assert.rejects(transition(s.db, id, 'pending', 'failed', { release: 'dropped' }), TransitionRefused);
      assert.equal((await findPayment(s.db, id)).state, 'pending');
    });

    test('of two racing movers one wins and the other is told it lost the race', async () => {
      const id = await recordedPayment(s.db);
      const row = await findPayment(s.db, id);
      const outcomes = await Promise.all([releaseUnsent(s.db, row), releaseUnsent(s.db, row)]);
      assert.deepEqual(outcomes.sort(), [false, true]);
      const released = await findPayment(s.db, id);
      assert.deepEqual([released.state, released.status, released.release_kind, isReleased(released)], ['released', 'failed', 'never_sent', true]);
      assert.equal(await transition(s.db, id, 'pending', 'failed', { set: { failure_reason: 'late' } }), 'lost-race');
    });

    test('released is the state, not the text: a reworded reason still counts, a copied text does not', async () => {
      const id = await recordedPayment(s.db);
      assert.equal(await markSubmitted(s.db, id, randomTx()), true);
      assert.equal(await releaseDropped(s.db, await findPayment(s.db, id)), true);
      await s.db.updateTable('payments').set({ failure_reason: 'reworded' }).where('id', '=', id).execute();
      assert.equal(isReleased(await findPayment(s.db, id)), true);
      const other = await recordedPayment(s.db);
      await transition(s.db, other, 'pending', 'failed', { set: { failure_reason: (await findPayment(s.db, id)).failure_reason } });
      assert.equal(isReleased(await findPayment(s.db, other)), false);
    });

    test('a released payment whose transaction came back is credited once, through the table', async () => {
      const id = await recordedPayment(s.db);
      await releaseUnsent(s.db, await findPayment(s.db, id));
      const tx = randomTx();
      const [a, b] = await Promise.all([creditPayment(s.db, id, tx, 1_000_000n), creditPayment(s.db, id, tx, 1_000_000n)]);
      assert.deepEqual([a.state, b.state, a.release_kind], ['credited', 'credited', null]);
      const credits = await s.db.selectFrom('ledger_entries').select('id').where('reference', '=', `payment:${id}`).execute();
      assert.equal(credits.length, 1);
    });

    test("a refusal before any hash was recorded releases the request's own claim, and not a replay's newer one", async () => {
      const own = await recordedPayment(s.db);
      assert.equal(await releaseRefused(s.db, await findPayment(s.db, own), null), true);
      assert.deepEqual([(await findPayment(s.db, own)).state, (await findPayment(s.db, own)).release_kind], ['released', 'refused_by_node']);
      const id = await recordedPayment(s.db);
      const claimedA = await findPayment(s.db, id);
      await releaseUnavailable(s.db, id, UNAVAILABLE_DURING_SETTLE, Number(claimedA.updated_at) + 1);
      assert.notEqual(await reclaimFailed(s.db, id, Number(claimedA.updated_at) + 2), null); // B claims it
      assert.equal(await releaseRefused(s.db, claimedA, null), false); // A's refusal, before any hash
      assert.equal((await findPayment(s.db, id)).state, 'pending');
    });
  });
}
