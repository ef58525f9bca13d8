import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { ensureWallet, getBalance } from '../../src/ledger/balances.ts';
import { adjustBalance, applyMovement } from '../../src/ledger/movements.ts';
import { isBalanceConstraintError, isUniqueViolation } from '../../src/storage/constraint-errors.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { consumeNonce, NONCE_PRUNE_MARGIN_MS, pruneNonces } from '../../src/siwe/nonce-store.ts';
import { resolveKeySecret } from '../../src/keys/hmac-secret.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';

const W = '0x00000000000000000000000000000000000000aa';
const V = '0x00000000000000000000000000000000000000bb';

async function assertLedgerOk(storage: Storage) {
  const result = await checkLedger(storage.db);
  assert.deepEqual(result.problems, []);
}

for (const engine of ENGINES) {
  describe(`storage and ledger (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      await migrateToLatest(storage);
    });
    after(() => storage.close());

    test('migrations are idempotent and record what they applied', async () => {
      assert.deepEqual(await migrateToLatest(storage), { applied: [] });
      const tables = [
        'wallets',
        'ledger_entries',
        'reservations',
        'api_keys',
        'siwe_nonces',
        'redeem_codes',
        'referral_codes',
        'referral_attributions',
        'request_usage',
        'settings',
      ];
      for (const t of tables) await sql`select count(*) from ${sql.table(t)}`.execute(storage.db);
    });

    test('a credit moves the balance and appends one entry; the sums agree', async () => {
      await storage.db
        .transaction()
        .execute((trx) => applyMovement(trx, { wallet: W.toUpperCase().replace('0X', '0x'), kind: 'adjustment', amountUsdc: 5_000_000, reference: 'test:1' }));
      await storage.db.transaction().execute((trx) => applyMovement(trx, { wallet: W, kind: 'adjustment', amountUsdc: -1_250_000, reference: 'test:2' }));
      assert.deepEqual(await getBalance(storage.db, W), { balance_usdc: 3_750_000, locked_usdc: 0, available_usdc: 3_750_000 });
      const entries = await storage.db.selectFrom('ledger_entries').select(['wallet', 'amount_usdc']).where('wallet', '=', W).execute();
      assert.deepEqual(
        entries.map((e) => [e.wallet, Number(e.amount_usdc)]),
        [
          [W, 5_000_000],
          [W, -1_250_000],
        ],
      );
      await assertLedgerOk(storage);
    });

    test('the database refuses a negative balance and rolls the entry back', async () => {
      await assert.rejects(
        storage.db.transaction().execute((trx) => applyMovement(trx, { wallet: W, kind: 'adjustment', amountUsdc: -10_000_000 })),
        (err) => isBalanceConstraintError(err),
      );
      assert.equal((await getBalance(storage.db, W)).balance_usdc, 3_750_000);
      await assertLedgerOk(storage);
    });

    test('the database refuses locked above balance', async () => {
      await assert.rejects(sql`update wallets set locked_usdc = balance_usdc + 1 where address = ${W}`.execute(storage.db), (err) =>
        isBalanceConstraintError(err),
      );
      await assert.rejects(sql`update wallets set locked_usdc = -1 where address = ${W}`.execute(storage.db), (err) => isBalanceConstraintError(err));
    });

    test('ledger entries are append-only', async () => {
      await assert.rejects(sql`update ledger_entries set amount_usdc = 1`.execute(storage.db), /append-only/);
      await assert.rejects(sql`delete from ledger_entries`.execute(storage.db), /append-only/);
    });

    test('one cause cannot move money twice', async () => {
      await storage.db.transaction().execute((trx) => applyMovement(trx, { wallet: V, kind: 'redeem', amountUsdc: 100, reference: 'redeem:999' }));
      await assert.rejects(
        storage.db.transaction().execute((trx) => applyMovement(trx, { wallet: V, kind: 'redeem', amountUsdc: 100, reference: 'redeem:999' })),
        (err) => isUniqueViolation(err),
      );
      assert.equal((await getBalance(storage.db, V)).balance_usdc, 100, 'the failed second credit rolled back');
      await assertLedgerOk(storage);
    });

    test('concurrent credits to one wallet all land', async () => {
      const wallet = '0x00000000000000000000000000000000000000cc';
      await Promise.all(Array.from({ length: 40 }, (_, i) => adjustBalance(storage.db, { wallet, amountUsdc: i + 1 })));
      assert.equal((await getBalance(storage.db, wallet)).balance_usdc, (40 * 41) / 2);
      await assertLedgerOk(storage);
    });

    test('ledger check finds a balance that disagrees with the entries', async () => {
      const wallet = '0x00000000000000000000000000000000000000dd';
      await adjustBalance(storage.db, { wallet, amountUsdc: 10 });
      await sql`update wallets set balance_usdc = 11 where address = ${wallet}`.execute(storage.db);
      const bad = await checkLedger(storage.db);
      assert.equal(bad.ok, false);
      assert.ok(
        bad.problems.some((p) => p.includes(`wallet ${wallet}: balance 11 != ledger sum 10`)),
        bad.problems.join('\n'),
      );
      assert.ok(bad.problems.some((p) => p.startsWith('credits ')));
      await sql`update wallets set balance_usdc = 10 where address = ${wallet}`.execute(storage.db);
      await assertLedgerOk(storage);
    });

    test('ledger check finds a lock with no pending reservation', async () => {
      const wallet = '0x00000000000000000000000000000000000000ee';
      await adjustBalance(storage.db, { wallet, amountUsdc: 10 });
      await sql`update wallets set locked_usdc = 4 where address = ${wallet}`.execute(storage.db);
      const bad = await checkLedger(storage.db);
      assert.ok(
        bad.problems.some((p) => p.includes('locked 4 != pending reservations 0')),
        bad.problems.join('\n'),
      );
      await sql`update wallets set locked_usdc = 0 where address = ${wallet}`.execute(storage.db);
      await assertLedgerOk(storage);
    });

    test('a SIWE nonce is used once, even when raced', async () => {
      const results = await Promise.all(Array.from({ length: 20 }, () => consumeNonce(storage.db, W, 'abcdefgh1234', Date.now() + 60_000)));
      assert.equal(results.filter(Boolean).length, 1);
      assert.equal(await consumeNonce(storage.db, V, 'abcdefgh1234', Date.now() + 60_000), true, 'nonces are per address');
      await consumeNonce(storage.db, W, 'expiredexpired', Date.now() - NONCE_PRUNE_MARGIN_MS - 1);
      await consumeNonce(storage.db, W, 'justexpiredjust', Date.now() - 1);
      assert.ok((await pruneNonces(storage.db)) >= 1);
      assert.equal(await consumeNonce(storage.db, W, 'expiredexpired', Date.now() + 60_000), true, 'a nonce past its margin is gone');
      assert.equal(
        await consumeNonce(storage.db, W, 'justexpiredjust', Date.now() + 60_000),
        false,
        "a nonce just past its expiry is kept for other instances' clocks",
      );
      assert.equal(await consumeNonce(storage.db, W, 'abcdefgh1234', Date.now() + 60_000), false, 'pruning keeps live nonces');
    });

    test('the generated key secret is stored once and shared', async () => {
      const [a, b] = await Promise.all([resolveKeySecret(storage.db), resolveKeySecret(storage.db)]);
      assert.equal(a.length, 32);
      assert.deepEqual(a, b);
      assert.deepEqual(await resolveKeySecret(storage.db), a);
    });

    test('a wallet row can exist with no entries', async () => {
      await ensureWallet(storage.db, '0x00000000000000000000000000000000000000ff');
      assert.deepEqual(await getBalance(storage.db, '0x00000000000000000000000000000000000000ff'), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      await assertLedgerOk(storage);
    });
  });
}
