import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { getBalance } from '../../src/ledger/balances.ts';
import { applyMovement } from '../../src/ledger/movements.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';

/**
 * The ledger's write units: on SQLite many are committed in one transaction (group commit), on
 * PostgreSQL each is its own. Either way a unit is all-or-nothing and its caller hears back only
 * once it is committed.
 */
for (const engine of ENGINES) {
  describe(`write units (${engine})`, () => {
    let s: Storage;
    let reader: Storage;
    before(async () => {
      const url = await freshDatabaseUrl(engine);
      s = openStorage(url);
      await migrateToLatest(s);
      // A second connection, as another process would have: it sees only committed data.
      reader = openStorage(url, { poolSize: 1 });
    });
    after(async () => {
      await reader.close();
      await s.close();
    });

    const funded = (amount: number) => fundedWallet(s.db, amount);
    const ledgerOk = () => assertLedgerConsistent(s.db);

    test('of 100 reservations sent at once against room for 40, exactly 40 lock, and each is committed when its caller hears back', async () => {
      const w = await funded(400);
      const seenByReader: boolean[] = [];
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-${i}`, amountUsdc: 10, leaseMs: 60_000 }).then(async (ok) => {
            if (ok) seenByReader.push(!!(await reader.db.selectFrom('reservations').select('id').where('request_id', '=', `${w}-${i}`).executeTakeFirst()));
            return ok;
          }),
        ),
      );
      assert.equal(results.filter(Boolean).length, 40);
      assert.equal(seenByReader.length, 40);
      assert.ok(seenByReader.every(Boolean), 'another connection sees every reservation once reserve() has answered');
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 400, locked_usdc: 400, available_usdc: 0 });
      await ledgerOk();

      const outcomes = await Promise.all(
        results.flatMap((ok, i) => (ok ? [finishReservation(s, `${w}-${i}`, i % 2 ? 7 : 0, usageRecord(`${w}-${i}`, w))] : [])),
      );
      assert.equal(outcomes.filter((o) => o.applied).length, 40);
      const charged = outcomes.reduce((sum, o) => sum + o.chargedUsdc, 0);
      assert.ok(charged > 0);
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 400 - charged, locked_usdc: 0, available_usdc: 400 - charged });
      await ledgerOk();
    });

    test('a unit that fails rolls back alone: the others sent with it commit', async () => {
      const w = await funded(1000);
      // The duplicate request id passes the balance check, locks funds, then hits the UNIQUE
      // constraint: its lock must be undone while the two good units beside it stay.
      const [a, dup, c] = await Promise.allSettled([
        reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-same`, amountUsdc: 100, leaseMs: 60_000 }),
        reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-same`, amountUsdc: 200, leaseMs: 60_000 }),
        reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-other`, amountUsdc: 300, leaseMs: 60_000 }),
      ]);
      // SQLite runs them in the order sent; on PostgreSQL they race on separate connections, so
      // either twin may be the one refused.
      assert.equal(c.status, 'fulfilled');
      const twins = [a, dup];
      assert.equal(twins.filter((t) => t.status === 'fulfilled').length, 1, 'exactly one of the twins reserves');
      const refused = twins.find((t) => t.status === 'rejected') as PromiseRejectedResult;
      assert.match(String(refused.reason), /unique|UNIQUE|duplicate/);
      const winnerAmount = a.status === 'fulfilled' ? 100 : 200;
      assert.deepEqual(await getBalance(reader.db, w), { balance_usdc: 1000, locked_usdc: winnerAmount + 300, available_usdc: 700 - winnerAmount });
      await ledgerOk();
      await finishReservation(s, `${w}-same`, 0, usageRecord(`${w}-same`, w));
      await finishReservation(s, `${w}-other`, 0, usageRecord(`${w}-other`, w));
      await ledgerOk();
    });

    test('units wait for a transaction already open on the connection instead of joining it', async () => {
      const w = await funded(1000);
      let reserved: Promise<boolean> | undefined;
      await s.db
        .transaction()
        .execute(async (trx) => {
          await applyMovement(trx, { wallet: w, kind: 'adjustment', amountUsdc: 500 });
          reserved = reserve(s, { wallet: w, apiKeyId: 1, requestId: `${w}-wait`, amountUsdc: 1200, leaseMs: 60_000 });
          // Give the unit every chance to run inside this transaction, if it wrongly could.
          await new Promise((r) => setTimeout(r, 30));
          throw new Error('roll this transaction back');
        })
        .catch((err: Error) => assert.equal(err.message, 'roll this transaction back'));
      assert.equal(await reserved, false, 'the rolled-back credit of 500 was never visible to the reservation');
      assert.deepEqual(await getBalance(s.db, w), { balance_usdc: 1000, locked_usdc: 0, available_usdc: 1000 });
      await ledgerOk();
    });
  });
}
