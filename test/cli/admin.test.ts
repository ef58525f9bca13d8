import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { ENGINES, freshDatabaseUrl, tempDir } from '../support/engines.ts';
import { call, startTestGateway } from '../support/gateway.ts';
import { newAccount, createKeyProof } from '../support/siwe.ts';
import { runTollgate } from '../support/cli.ts';

function tollgate(configPath: string, ...args: string[]) {
  return runTollgate(['--config', configPath, ...args]);
}

describe('tollgate command', () => {
  test('--help lists serve, migrate, admin, wallet and demo', async () => {
    const { stdout } = await runTollgate(['--help']);
    for (const cmd of ['serve', 'migrate', 'admin', 'wallet', 'demo']) assert.match(stdout, new RegExp(`^  ${cmd}`, 'm'));
    const admin = await runTollgate(['admin', '--help']);
    for (const cmd of ['redeem-codes', 'ref-codes', 'wallet', 'credit', 'ledger-check']) assert.match(admin.stdout, new RegExp(cmd));
  });

  test('a mistyped command is named as unknown, with the list of commands, not as an argument of serve', async () => {
    for (const args of [['keyz'], ['--config', 'nowhere.yaml', 'wallets', 'new'], ['serve', 'now']]) {
      const res = await runTollgate(args);
      assert.equal(res.code, 2, res.stderr);
      const typed = args.find((a) => !['--config', 'nowhere.yaml', 'serve'].includes(a))!;
      assert.match(
        res.stderr,
        new RegExp(`^tollgate: "${typed}" is not a tollgate command; the commands are serve, migrate, facilitator, admin, wallet, demo`),
      );
      assert.doesNotMatch(res.stderr, /too many arguments for 'serve'/);
    }
  });

  test('a bad configuration stops with the key named and exit code 2', async () => {
    const dir = tempDir();
    const path = join(dir, 'bad.yaml');
    writeFileSync(path, 'server:\n  port: -1\n');
    const res = await tollgate(path, 'migrate');
    assert.equal(res.code, 2);
    assert.match(res.stderr, /server\.port/);
    assert.ok(!res.stderr.includes('    at '), 'no stack trace for a configuration mistake');
  });
});

for (const engine of ENGINES) {
  describe(`tollgate migrate and admin (${engine})`, () => {
    let configPath: string;
    let storage: Storage;
    const wallet = newAccount().address.toLowerCase();

    before(async () => {
      const url = await freshDatabaseUrl(engine);
      configPath = join(tempDir(), 'tollgate.yaml');
      writeFileSync(configPath, `database:\n  url: "${url}"\nserver:\n  publicUrl: http://gateway.test\n`);
      const migrated = await tollgate(configPath, 'migrate');
      assert.equal(migrated.code, 0, migrated.stderr);
      assert.match(migrated.stdout, /applied 001-foundation/);
      assert.match((await tollgate(configPath, 'migrate')).stdout, /already up to date/);
      storage = openStorage(url);
    });
    after(() => storage.close());

    test('credit is an audited adjustment; a debit below zero is refused', async () => {
      const res = await tollgate(configPath, 'admin', 'credit', wallet, '--usd', '12.5', '--reason', 'support refund #42');
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, /balance now \$12\.500000/);
      assert.equal((await getBalance(storage.db, wallet)).balance_usdc, 12_500_000);
      const entry = await storage.db.selectFrom('ledger_entries').selectAll().where('wallet', '=', wallet).executeTakeFirstOrThrow();
      assert.equal(entry.kind, 'adjustment');
      assert.match(entry.note ?? '', /^support refund #42 \(by .+\)$/);
      assert.match(entry.reference ?? '', /^admin:/);

      const debit = await tollgate(configPath, 'admin', 'credit', wallet, '--usd=-2.5', '--reason', 'correction');
      assert.equal(debit.code, 0, debit.stderr);
      assert.equal((await getBalance(storage.db, wallet)).balance_usdc, 10_000_000);
      const over = await tollgate(configPath, 'admin', 'credit', wallet, '--usd=-100', '--reason', 'too much');
      assert.equal(over.code, 2);
      assert.match(over.stderr, /below zero/);
      assert.equal((await getBalance(storage.db, wallet)).balance_usdc, 10_000_000);
      assert.deepEqual((await checkLedger(storage.db)).problems, []);
    });

    test('credit refuses bad input', async () => {
      for (const args of [
        ['0x123', '--usd', '1', '--reason', 'r'],
        [wallet, '--usd', 'ten', '--reason', 'r'],
        [wallet, '--usd', '1.0000001', '--reason', 'r'],
        [wallet, '--usd', '0', '--reason', 'r'],
        [wallet, '--usd', '1', '--reason', ' '],
      ]) {
        const res = await tollgate(configPath, 'admin', 'credit', ...args);
        assert.equal(res.code, 2, args.join(' '));
        assert.match(res.stderr, /^tollgate: /);
      }
      const missing = await tollgate(configPath, 'admin', 'credit', wallet, '--usd', '1');
      assert.notEqual(missing.code, 0);
      assert.match(missing.stderr, /--reason/);
    });

    test('redeem codes print once and work with POST /v1/auth/keys', async () => {
      const res = await tollgate(configPath, 'admin', 'redeem-codes', 'create', '--usd', '3', '--count', '2');
      assert.equal(res.code, 0, res.stderr);
      const codes = res.stdout.trim().split('\n');
      assert.equal(codes.length, 2);
      assert.match(res.stderr, /worth \$3\.000000 each/);
      const stored = JSON.stringify(await storage.db.selectFrom('redeem_codes').selectAll().execute());
      for (const c of codes) assert.ok(!stored.includes(c), 'codes are stored hashed');

      const gw = await startTestGateway({
        engine,
        databaseUrl: (await import('../../src/config/load.ts')).loadConfig({ path: configPath, env: {} }).database.url,
      });
      try {
        const account = newAccount();
        const created = await call(gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), redeem_code: codes[0] });
        assert.equal(created.status, 201, created.text);
        assert.equal(created.body.redeemed_credit_usdc, 3_000_000);
        await gw.assertLedger();
      } finally {
        await gw.stop();
      }
      assert.equal((await tollgate(configPath, 'admin', 'redeem-codes', 'create', '--usd', '3', '--count', '0')).code, 2);
    });

    test('ref-codes create prints a code bound to the wallet', async () => {
      const res = await tollgate(configPath, 'admin', 'ref-codes', 'create', '--wallet', wallet);
      assert.equal(res.code, 0, res.stderr);
      const code = res.stdout.trim();
      assert.match(code, /^ref-[a-z0-9]{10}$/);
      const row = await storage.db.selectFrom('referral_codes').selectAll().where('code', '=', code).executeTakeFirstOrThrow();
      assert.equal(row.wallet, wallet);
      assert.equal((await tollgate(configPath, 'admin', 'ref-codes', 'create', '--wallet', 'nope')).code, 2);
    });

    test('wallet shows balance, keys and recent ledger entries', async () => {
      const res = await tollgate(configPath, 'admin', 'wallet', wallet);
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stdout, /balance +\$10\.000000 \(10000000 micro-USDC\)/);
      assert.match(res.stdout, /locked +\$0\.000000/);
      assert.match(res.stdout, /adjustment +-2\.500000 +admin:.* correction/);
      assert.match(res.stdout, /adjustment +12\.500000 +admin:.* support refund #42/);
    });

    test('ledger-check exits 0 when sound and 1 when an invariant fails', async () => {
      const ok = await tollgate(configPath, 'admin', 'ledger-check');
      assert.equal(ok.code, 0, ok.stdout + ok.stderr);
      assert.match(ok.stdout, /ledger OK/);
      await sql`update wallets set balance_usdc = balance_usdc + 1 where address = ${wallet}`.execute(storage.db);
      const bad = await tollgate(configPath, 'admin', 'ledger-check');
      assert.equal(bad.code, 1);
      assert.match(bad.stdout, /ledger check FAILED/);
      assert.match(bad.stdout, new RegExp(`wallet ${wallet}: balance 10000001 != ledger sum 10000000`));
      await sql`update wallets set balance_usdc = balance_usdc - 1 where address = ${wallet}`.execute(storage.db);
    });
  });
}
