import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { MatchedPayment } from '../../src/payments/match.ts';
import { findPayment, markSubmitted, openPayment } from '../../src/payments/payment-store.ts';
import { assertLedgerConsistent } from '../support/ledger.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';

/**
 * A settling transaction belongs to one payment. The x402 facilitator answers a settle of a
 * signature it is already settling with that settlement's hash, so a second payment can be told a
 * transaction that is not its own: recording it must be refused as a value (the top-up is then
 * rejected), not thrown from the unique (network, tx_hash) index as a 500.
 */
function payment(nonce: string): MatchedPayment {
  const payer = '0x00000000000000000000000000000000000000c1';
  const payTo = '0x00000000000000000000000000000000000000b0';
  const asset = '0x00000000000000000000000000000000000000a5';
  const inner = {
    signature: `0x${nonce.slice(-2).repeat(65)}`,
    authorization: { from: payer, to: payTo, value: '1000000', validAfter: '0', validBefore: '2000000000', nonce },
  };
  return {
    offer: { config: { network: 'eip155:31337', asset, transferMethod: 'eip3009', name: 'USDC', version: '2', decimals: 6 }, requirements: {} as never },
    payload: { x402Version: 2, accepted: {} as PaymentRequirements, payload: inner } as PaymentPayload,
    requirements: {} as PaymentRequirements,
    identity: { network: 'eip155:31337', chainId: 31337, asset, payer, nonce, method: 'eip3009', payTo, amountAtomic: '1000000', validBefore: 2_000_000_000 },
    digest: nonce,
  };
}

for (const engine of ENGINES) {
  describe(`a settling transaction is owned by one payment (${engine})`, () => {
    let storage: Storage;
    after(async () => storage?.close());

    test("recording another payment's transaction is refused as a value and leaves the row untouched", async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(storage);
      const a = await openPayment(storage.db, payment(`0x${'1'.repeat(64)}`), 0, Date.now());
      const b = await openPayment(storage.db, payment(`0x${'2'.repeat(64)}`), 0, Date.now());
      assert.equal(a.kind, 'claimed');
      assert.equal(b.kind, 'claimed');
      const tx = `0x${'ab'.repeat(32)}`;
      assert.equal(await markSubmitted(storage.db, a.row.id, tx), true);
      assert.equal(await markSubmitted(storage.db, b.row.id, tx), false);
      assert.equal((await findPayment(storage.db, b.row.id)).tx_hash, null);
      assert.equal((await findPayment(storage.db, a.row.id)).tx_hash, tx);
      await assertLedgerConsistent(storage.db);
    });
  });
}
