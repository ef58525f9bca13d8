import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { MoneyInvariantError } from '../../src/ledger/assert.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { lateCharge } from '../../src/ledger/operations/late-charge.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { assertLedgerConsistent, newWallet, usageRecord } from '../support/ledger.ts';
import { freshSqliteUrl } from '../support/sqlite-engine.ts';

/**
 * The ledger operations refuse an amount that is not whole micro-USDC, or negative, with a
 * MoneyInvariantError before anything is written: a caller's arithmetic slip is a loud defect,
 * never a lock, a charge or a credit of a fraction or of a negative amount.
 */
const isMoneyInvariant = (err: unknown) => err instanceof MoneyInvariantError;

describe('money invariants asserted inside the ledger operations', () => {
  let s: Storage;
  let wallet: string;
  before(async () => {
    s = openStorage(freshSqliteUrl());
    await migrateToLatest(s);
    wallet = newWallet();
    await adjustBalance(s.db, { wallet, amountUsdc: 1_000 });
  });
  after(() => s.close());

  for (const amountUsdc of [-5, 1.5, Number.NaN]) {
    test(`a reservation of ${amountUsdc} is refused and nothing is locked`, async () => {
      const reserving = tryReserve(s, { wallet, apiKeyId: 1, requestId: `bad-${amountUsdc}`, amountUsdc, leaseMs: 60_000 });
      await assert.rejects(reserving, isMoneyInvariant);
      assert.deepEqual(await getBalance(s.db, wallet), { balance_usdc: 1_000, locked_usdc: 0, available_usdc: 1_000 });
      await assertLedgerConsistent(s.db);
    });
  }

  test('a settle asking a negative charge, which would credit the wallet, is refused and the reservation stays open', async () => {
    assert.equal((await tryReserve(s, { wallet, apiKeyId: 1, requestId: 'neg', amountUsdc: 100, leaseMs: 60_000 })).ok, true);
    await assert.rejects(finishReservation(s, 'neg', -50, usageRecord('neg', wallet)), isMoneyInvariant);
    assert.deepEqual(await getBalance(s.db, wallet), { balance_usdc: 1_000, locked_usdc: 100, available_usdc: 900 });
    assert.equal((await finishReservation(s, 'neg', 40, usageRecord('neg', wallet))).chargedUsdc, 40);
    await assertLedgerConsistent(s.db);
  });

  test('a late charge of a fraction is refused', async () => {
    const late = lateCharge(s, { requestId: 'neg', wallet, chargeUsdc: 0.5, usage: usageRecord('neg', wallet) }, Date.now());
    await assert.rejects(late, isMoneyInvariant);
    await assertLedgerConsistent(s.db);
  });
});
