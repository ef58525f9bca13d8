import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { claimPaymentIdentifier, releasePaymentIdentifier, startIdentifiedRun } from '../../../src/payments/pay-per-request/identifier-store.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { migrateToLatest } from '../../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';

/**
 * Request A's payment could not be settled (the relayer could not send it)
 * and A frees its payment identifier, while request B, sent with the same payment, has taken the
 * released payment over and is settling it under the same identifier. A plain delete freed B's
 * claim too: a third request with another payment could then claim the identifier and be paid and
 * run beside B. The store frees a claim only for the request holding it (compare-and-delete).
 */
for (const engine of ENGINES) {
  describe(`attack: a request that frees its payment identifier cannot free the claim another request holds (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(storage);
    });
    after(() => storage.close());

    const claim = (id: string, holder: string, paymentDigest = 'payment-1') =>
      claimPaymentIdentifier(storage.db, { payer: '0xpayer', id, bodyDigest: 'body', paymentDigest, holder, now: Date.now() });
    const rowOf = (id: string) =>
      storage.db.selectFrom('payment_identifiers').selectAll().where('payer', '=', '0xpayer').where('id', '=', id).executeTakeFirst();

    test("A's release after B took the claim over with the same payment leaves B's claim; a third payment is still a 409", async () => {
      assert.deepEqual(await claim('race', 'request-a'), { kind: 'claimed' });
      assert.deepEqual(await claim('race', 'request-b'), { kind: 'claimed' }, 'the same payment sent again takes the claim over');
      await releasePaymentIdentifier(storage.db, { payer: '0xpayer', id: 'race', holder: 'request-a' });
      assert.equal((await rowOf('race'))?.holder, 'request-b', "A freed B's claim");
      const third = await claim('race', 'request-c', 'payment-2');
      assert.equal(third.kind, 'conflict');
      assert.equal(third.kind === 'conflict' && third.reason, 'in-progress');
      assert.equal(await startIdentifiedRun(storage.db, { payer: '0xpayer', id: 'race', paymentDigest: 'payment-1', holder: 'request-b' }), true);
      assert.equal((await rowOf('race'))?.request_id, 'request-b');
    });

    test('the holder frees its own claim, started or not, and the identifier can be claimed again', async () => {
      await claim('own', 'request-a');
      await releasePaymentIdentifier(storage.db, { payer: '0xpayer', id: 'own', holder: 'request-a' });
      assert.equal(await rowOf('own'), undefined);
      // A run refused before it reserved anything: its holder frees the mark it set.
      await claim('own', 'request-b');
      assert.equal(await startIdentifiedRun(storage.db, { payer: '0xpayer', id: 'own', paymentDigest: 'payment-1', holder: 'request-b' }), true);
      await releasePaymentIdentifier(storage.db, { payer: '0xpayer', id: 'own', holder: 'request-b' });
      assert.deepEqual(await claim('own', 'request-c', 'payment-2'), { kind: 'claimed' });
    });

    test('a request that lost the claim to a run that started cannot free it', async () => {
      await claim('ran', 'request-a');
      await claim('ran', 'request-b');
      assert.equal(await startIdentifiedRun(storage.db, { payer: '0xpayer', id: 'ran', paymentDigest: 'payment-1', holder: 'request-b' }), true);
      assert.equal(
        await startIdentifiedRun(storage.db, { payer: '0xpayer', id: 'ran', paymentDigest: 'payment-1', holder: 'request-a' }),
        false,
        'one run per identifier',
      );
      await releasePaymentIdentifier(storage.db, { payer: '0xpayer', id: 'ran', holder: 'request-a' });
      assert.equal((await rowOf('ran'))?.request_id, 'request-b');
    });
  });
}
