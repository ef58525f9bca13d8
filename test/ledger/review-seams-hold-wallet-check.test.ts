import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import type { LedgerEntryTable } from '../../src/storage/schema.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';

/**
 * The stray-entry rule lets money enter an upto hold wallet by a `topup` (the older form of a hold).
 * Written by a bug or a hand naming a payment that does not exist, such an entry is money no upto
 * payment accounts for: ledger-check must still name it (the top-up rule does).
 */
for (const engine of ENGINES) {
  describe(`attack: an upto hold wallet moved by entries that only look like a release or an older hold (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    async function uptoHoldWallet(): Promise<string> {
      const address = `0x${randomUUID().replaceAll('-', '')}${randomUUID().replaceAll('-', '').slice(0, 8)}#upto`;
      await s.db.insertInto('wallets').values({ address, balance_usdc: 10, locked_usdc: 0, created_at: Date.now(), updated_at: Date.now() }).execute();
      return address;
    }
    const entry = (wallet: string, kind: LedgerEntryTable['kind'], amount: number, reference: string) =>
      s.db.insertInto('ledger_entries').values({ wallet, kind, amount_usdc: amount, reference, note: 'tampered', created_at: Date.now() }).execute();

    test('a topup into an upto hold wallet naming no payment is a problem', async () => {
      assert.deepEqual((await checkLedger(s.db)).problems, [], 'a fresh ledger is clean');
      const wallet = await uptoHoldWallet();
      await entry(wallet, 'topup', 10, `payment:${randomUUID()}`);
      assert.notDeepEqual((await checkLedger(s.db)).problems, [], 'a topup into a hold wallet from no payment is named');
    });
  });
}
