import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { claimPaymentIdentifier, startIdentifiedRun } from '../../../src/payments/pay-per-request/identifier-store.ts';
import { stateColumns } from '../../../src/payments/states.ts';
import type { PaymentState, ReleaseKind } from '../../../src/storage/schema.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { migrateToLatest } from '../../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';
import { recordedPayment } from '../../support/payment-rows.ts';

/**
 * A paid request's first payment was left pending (503 PAYMENT_PENDING: its claim on the payment
 * identifier is kept for the resend of that payment) and the reconciler then found it failed or let
 * it go unsent. Nothing freed the identifier: every new payment the agent signed under it was
 * "409 … being paid for with another payment" until the claim was pruned a day later. Now a new
 * payment takes over a claim whose payment settled nothing; a payment still settling keeps it.
 */
for (const engine of ENGINES) {
  describe(`a payment identifier whose first payment settled nothing is taken by the next payment (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(storage);
    });
    after(() => storage.close());

    const PAYER = '0xpayer';
    const claim = (id: string, holder: string, paymentDigest: string) =>
      claimPaymentIdentifier(storage.db, { payer: PAYER, id, bodyDigest: 'body', paymentDigest, holder, now: Date.now() });
    /** The first payment's row, in `state`, under the digest its claim names. */
    async function firstPayment(state: PaymentState, release: ReleaseKind | null = null): Promise<string> {
      const id = await recordedPayment(storage.db, PAYER);
      const row = await storage.db.selectFrom('payments').select('payload_digest').where('id', '=', id).executeTakeFirstOrThrow();
      await storage.db.updateTable('payments').set(stateColumns(state, release)).where('id', '=', id).execute();
      return row.payload_digest;
    }

    const gone: Array<[PaymentState, ReleaseKind | null]> = [
      ['failed', null],
      ['released', 'never_sent'],
      ['released', 'refused_by_node'],
    ];
    for (const [state, release] of gone) {
      test(`first payment ${state} ${release ?? ''}: a new payment under the id is claimed and runs once`, async () => {
        const id = `after-${state}-${release}`;
        const first = await firstPayment(state, release);
        assert.deepEqual(await claim(id, 'request-a', first), { kind: 'claimed' });
        assert.deepEqual(await claim(id, 'request-b', 'payment-2'), { kind: 'claimed' }, 'the identifier stayed stuck on a payment that settled nothing');
        assert.equal(await startIdentifiedRun(storage.db, { payer: PAYER, id, paymentDigest: 'payment-2', holder: 'request-b' }), true);
        // The first payment, should it be credited after all, does not run a second time.
        assert.equal(await startIdentifiedRun(storage.db, { payer: PAYER, id, paymentDigest: first, holder: 'request-a' }), false);
      });
    }

    // Released as dropped or unavailable, the payment's transaction may still be mined: paid twice under one id otherwise.
    const live: Array<[PaymentState, ReleaseKind | null]> = [
      ['pending', null],
      ['submitted', null],
      ['credited', null],
      ['released', 'dropped'],
      ['released', 'unavailable'],
    ];
    for (const [state, release] of live) {
      test(`first payment ${state} ${release ?? ''}: a new payment under the id is still the 409`, async () => {
        const id = `while-${state}-${release}`;
        const first = await firstPayment(state, release);
        assert.deepEqual(await claim(id, 'request-a', first), { kind: 'claimed' });
        const second = await claim(id, 'request-b', 'payment-2');
        assert.equal(second.kind === 'conflict' && second.reason, 'in-progress');
      });
    }

    test('a claim whose payment was never recorded (its request still between claim and record) stays the first request’s', async () => {
      assert.deepEqual(await claim('unrecorded', 'request-a', 'never-recorded'), { kind: 'claimed' });
      const second = await claim('unrecorded', 'request-b', 'payment-2');
      assert.equal(second.kind === 'conflict' && second.reason, 'in-progress');
    });
  });
}
