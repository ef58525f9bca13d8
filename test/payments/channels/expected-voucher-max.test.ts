import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { expectedVoucherMax } from '../../../src/payments/channels/spent-vouchers.ts';
import { openStorage, type Storage } from '../../../src/storage/database.ts';
import { migrateToLatest } from '../../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../../support/engines.ts';

/**
 * The maximum a channel request's voucher must sign: the first at or above "charged + ceiling" that
 * no voucher has paid with. Never a spent one, however the spent maxima lie (a run of them longer
 * than one page of the lookup included), and never one of another channel's.
 */
for (const engine of ENGINES) {
  describe(`the voucher maximum a channel request must sign (${engine})`, () => {
    let s: Storage;
    before(async () => {
      s = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(s);
      const spent = [100, 101, 102, 105, ...Array.from({ length: 70 }, (_, i) => 1_000 + i)];
      await s.db
        .insertInto('channel_spent_vouchers')
        .values(spent.map((max_usdc) => ({ channel_id: 'a', max_usdc })))
        .execute();
      await s.db.insertInto('channel_spent_vouchers').values({ channel_id: 'b', max_usdc: 50 }).execute();
    });
    after(() => s?.close());

    test('"charged + ceiling" itself when no voucher paid with it', async () => {
      assert.equal(await expectedVoucherMax(s.db, 'a', 99), 99);
      assert.equal(await expectedVoucherMax(s.db, 'a', 104), 104);
      assert.equal(await expectedVoucherMax(s.db, 'a', 50), 50, "another channel's spent voucher is not this one's");
    });

    test('past a run of spent maxima, the first free one', async () => {
      assert.equal(await expectedVoucherMax(s.db, 'a', 100), 103);
      assert.equal(await expectedVoucherMax(s.db, 'a', 102), 103);
      assert.equal(await expectedVoucherMax(s.db, 'a', 105), 106);
      assert.equal(await expectedVoucherMax(s.db, 'a', 1_000), 1_070, 'a run longer than one page of the lookup');
      assert.equal(await expectedVoucherMax(s.db, 'a', 1_069), 1_070);
    });
  });
}
