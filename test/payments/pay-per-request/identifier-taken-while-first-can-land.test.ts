import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { claimPaymentIdentifier, startIdentifiedRun } from '../../../src/payments/pay-per-request/identifier-store.ts';
import { creditPayment } from '../../../src/payments/payment-store.ts';
import { stateColumns } from '../../../src/payments/states.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { migrateToLatest } from '../../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { recordedPayment } from '../../support/payment-rows.ts';

/**
 * The follow-up of identifier-after-failed-payment.test.ts (ee77385: a payment identifier whose
 * payment "settled nothing" is taken by the next payment). "Settled nothing" is read as state
 * `failed` or `released`, but a release is not always final: `dropped` is a settlement sent and
 * dropped by the node that "may come back and be mined after all" (payment-store.ts releaseDropped,
 * and the reconciler then credits it), and `unavailable` is a settle the facilitator may have sent
 * before it failed to answer. docs/api.md promises a client that keeps its id "is never paid or run
 * twice for it", and that only a payment found to have "failed on chain, or was let go unsent"
 * frees it. Here the first payment's settlement was dropped; a second payment takes the id over and
 * its request runs; the first settlement is then mined and the reconciler credits it: the payer
 * paid twice under one id for one request.
 */
for (const engine of ENGINES) {
  describe(`a payment identifier taken over while its first payment can still land on chain (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(storage);
    });
    after(() => storage.close());

    for (const kind of ['dropped', 'unavailable'] as const) {
      test(`first payment released (${kind}): a new payment under the id is not taken, so the id is never paid twice`, async () => {
        const payer = `0x${kind === 'dropped' ? 'd' : 'u'}${'0'.repeat(39)}`;
        const id = `first-${kind}`;
        const first = await recordedPayment(storage.db, payer);
        const { payload_digest: firstDigest } = await storage.db
          .selectFrom('payments')
          .select('payload_digest')
          .where('id', '=', first)
          .executeTakeFirstOrThrow();
        const claim = (holder: string, paymentDigest: string) =>
          claimPaymentIdentifier(storage.db, { payer, id, bodyDigest: 'body', paymentDigest, holder, now: Date.now() });
        assert.deepEqual(await claim('request-a', firstDigest), { kind: 'claimed' });
        // The reconciler let the first payment go: its transaction was dropped by the node (or the facilitator fell silent mid-settle).
        await storage.db.updateTable('payments').set(stateColumns('released', kind)).where('id', '=', first).execute();

        // The agent pays again under the same id.
        const second = await claim('request-b', 'payment-2');
        const ran = second.kind === 'claimed' && (await startIdentifiedRun(storage.db, { payer, id, paymentDigest: 'payment-2', holder: 'request-b' }));
        // The first settlement comes back and is mined; the reconciler credits it (released → credited).
        const credited = await creditPayment(storage.db, first, `0x${(kind === 'dropped' ? 'ab' : 'cd').repeat(32)}`, 1_000_000n);
        await assertLedgerConsistent(storage.db);
        assert.ok(
          !(ran && credited.status === 'credited'),
          `under payment identifier "${id}" the second payment ran the request and the first was credited too: the payer paid twice for one request (the first as balance)`,
        );
      });
    }
  });
}
