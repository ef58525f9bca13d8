import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { generateKey, insertKey } from '../../src/keys/api-keys.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet } from '../support/ledger.ts';

/**
 * A unit's statement that reads a counter table must see the additions waiting in its batch
 * (src/storage/batch-counters.ts) however it spells the table: SQL names are case-insensitive on
 * both engines, and through a join or an alias the name is still in the text.
 */
for (const engine of ENGINES) {
  describe(`attack: a unit reads the key's buckets with the table's name spelt otherwise (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
    });
    after(() => s.close());

    const readers: Array<[how: string, sql: string]> = [
      ['in capitals', "SELECT locked_usdc FROM KEY_SPEND WHERE api_key_id = ? AND period = 'total'"],
      ['in mixed case', "SELECT locked_usdc FROM Key_Spend WHERE api_key_id = ? AND period = 'total'"],
      ['through a join and an alias', "SELECT b.locked_usdc FROM api_keys k JOIN key_spend b ON b.api_key_id = k.id WHERE k.id = ? AND b.period = 'total'"],
    ];
    for (const [how, sql] of readers) {
      test(`a read of the buckets ${how}, in the batch after two reserves, sees both counted`, async () => {
        const wallet = await fundedWallet(s.db, 10_000);
        const apiKeyId = (await insertKey(s.db, wallet, generateKey(randomBytes(32)), 'case')).id;
        const reserveOne = (id: string) => tryReserve(s, { wallet, apiKeyId, requestId: `${wallet}-${id}`, amountUsdc: 100, leaseMs: 60_000 });
        const [a, b, seen] = await Promise.all([
          reserveOne('a'),
          reserveOne('b'),
          s.writeUnit((tx) => tx.get<{ locked_usdc: number }>(sql, [apiKeyId]), { wallet }),
        ]);
        assert.ok(a.ok && b.ok);
        assert.equal(Number(seen?.locked_usdc), 200);
        await assertLedgerConsistent(s.db);
      });
    }
  });
}
