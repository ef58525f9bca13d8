import assert from 'node:assert/strict';
import { TEST_ORIGIN } from '../support/origin.ts';
import { after, afterEach, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { chooseOffer } from '../../src/gateway-client/topup-client.ts';
import { runTollgate, type CliResult } from '../support/cli.ts';
import { startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';
import type { FundedAccount } from '../../src/devchain/deploy.ts';
import { privateKeyToAccount } from 'viem/accounts';

describe('tollgate wallet new (no gateway, no key)', () => {
  test('prints a fresh private key and the address it derives to, once, with a warning on stderr', async () => {
    const res = await runTollgate(['wallet', 'new']);
    assert.equal(res.code, 0, res.stderr);
    const [keyLine, addressLine, ...rest] = res.stdout.split('\n');
    // Each line names what it holds, so nobody credits or publishes the wrong one.
    const key = /^private key {2}(0x[0-9a-f]{64})$/.exec(keyLine!)?.[1];
    assert.ok(key, keyLine);
    assert.equal(addressLine, `address      ${privateKeyToAccount(key as `0x${string}`).address}`);
    assert.deepEqual(rest, ['']);
    assert.match(res.stderr, /shown once and stored nowhere/);
    assert.match(res.stderr, /Whoever holds it holds the funds/);
    assert.doesNotMatch(res.stderr, /0x[0-9a-f]{64}/, 'the key is not repeated in the warning');
  });

  test('--json gives private_key and address; two calls give two different wallets', async () => {
    const a = await runTollgate(['wallet', '--json', 'new']);
    const b = await runTollgate(['wallet', '--json', 'new']);
    assert.equal(a.code, 0, a.stderr);
    const wa = JSON.parse(a.stdout) as { private_key: `0x${string}`; address: string };
    const wb = JSON.parse(b.stdout) as { private_key: `0x${string}`; address: string };
    assert.equal(wa.address, privateKeyToAccount(wa.private_key).address);
    assert.notEqual(wa.private_key, wb.private_key);
    assert.match(a.stderr, /shown once/);
  });

  test('ignores TOLLGATE_WALLET_KEY: it never prints a key it was given', async () => {
    const given = '0x' + '11'.repeat(32);
    const res = await runTollgate(['wallet', 'new'], { TOLLGATE_WALLET_KEY: given });
    assert.equal(res.code, 0, res.stderr);
    assert.ok(!res.stdout.includes(given.slice(2)));
  });
});

describe('tollgate wallet (against a gateway on a real chain)', () => {
  let h: TopupHarness;
  let payer: FundedAccount;
  const outputs: CliResult[] = [];

  before(async () => {
    h = await startTopupHarness('sqlite');
    payer = await h.payer(20n);
  });
  afterEach(() => h.gw.assertLedger());
  after(async () => {
    await h?.stop();
  });

  async function wallet(args: string[], key: string | null = payer.privateKey, extraEnv: NodeJS.ProcessEnv = {}) {
    // The test gateway's public URL (its SIWE domain) is not the 127.0.0.1 address the CLI reaches it by.
    const env: NodeJS.ProcessEnv = { TOLLGATE_SIWE_DOMAIN: new URL(TEST_ORIGIN).host, ...extraEnv };
    if (key !== null) env.TOLLGATE_WALLET_KEY = key;
    const res = await runTollgate(['wallet', '--gateway', h.gw.url, ...args], env);
    outputs.push(res);
    return res;
  }
  const json = (res: CliResult) => {
    assert.equal(res.code, 0, res.stderr);
    return JSON.parse(res.stdout);
  };

  test('topup --usd 5 pays USDC with @x402/fetch, shows the on-chain wait, and is credited once', async () => {
    const before = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
    const res = await wallet(['topup', '--usd', '5']);
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /^credited \$5\.000000; balance \$5\.000000\ntransaction 0x[0-9a-f]{64} on eip155:84532\n$/);
    assert.match(res.stderr, /paying 5000000 units of USD Coin .* eip3009/);
    assert.match(res.stderr, /waiting for the payment to settle on chain/);
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - before, 5n * USD);
  });

  test('topup --method permit2 pays USDT after the one-time approval; --json is machine-readable', async () => {
    await h.chain.approvePermit2(payer, h.chain.usdt);
    const body = json(await wallet(['--json', 'topup', '--usd', '2.5', '--method', 'permit2']));
    assert.equal(body.credited_usdc, 2_500_000);
    assert.equal(body.balance_usdc, 7_500_000);
    assert.equal(body.asset.toLowerCase(), h.chain.usdt.toLowerCase());
    assert.equal(await h.balance(payer.address), 7_500_000);
  });

  test('keys create, list and revoke sign fresh SIWE proofs; a revoked key stops working', async () => {
    const created = json(await wallet(['--json', 'keys', 'create', '--label', 'from the cli']));
    assert.match(created.key, /^sk-/);
    assert.equal(created.label, 'from the cli');
    const chat = () => fetch(`${h.gw.url}/v1/usage/${payer.address}`, { headers: { authorization: `Bearer ${created.key}` } }).then((r) => r.status);
    assert.equal(await chat(), 200);

    const listed = json(await wallet(['--json', 'keys', 'list'])).data;
    assert.deepEqual(
      listed.map((k: { id: number; revoked_at: string | null }) => [k.id, k.revoked_at]),
      [[created.id, null]],
    );
    const text = await wallet(['keys', 'list']);
    assert.match(text.stdout, new RegExp(`^\\s+${created.id}  active .*from the cli$`, 'm'));

    const revoked = await wallet(['keys', 'revoke', String(created.id)]);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.equal(revoked.stdout, `revoked key ${created.id}\n`);
    assert.equal(await chat(), 401);
    const after = json(await wallet(['--json', 'keys', 'list'])).data;
    assert.ok(after[0].revoked_at, 'the list shows the key as revoked');
  });

  test('keys create --redeem-code and --ref-code use codes made by the admin CLI', async () => {
    const configPath = join(mkdtempSync(join(tmpdir(), 'tollgate-wallet-cli-')), 'tollgate.yaml');
    writeFileSync(configPath, `database:\n  url: "${h.gw.config.database.url}"\n`);
    const admin = async (...args: string[]) => {
      const res = await runTollgate(['--config', configPath, 'admin', ...args]);
      assert.equal(res.code, 0, res.stderr);
      return res.stdout.trim();
    };
    try {
      const redeemer = await h.chain.newAccount();
      const redeemCode = await admin('redeem-codes', 'create', '--usd', '3');
      const redeemed = await wallet(['keys', 'create', '--redeem-code', redeemCode], redeemer.privateKey);
      assert.equal(redeemed.code, 0, redeemed.stderr);
      assert.match(redeemed.stdout, new RegExp(`^sk-\\S+\\n\\(key id \\d+; .*\\)\\nthe redeem code credited \\$3\\.000000 to ${redeemer.address}\\n$`));
      assert.equal(await h.balance(redeemer.address), 3_000_000);
      const again = await wallet(['keys', 'create', '--redeem-code', redeemCode], redeemer.privateKey);
      assert.equal(again.code, 2);
      assert.match(again.stderr, /VALIDATION_ERROR: redeem_code is unknown or has already been used/);
      assert.equal(await h.balance(redeemer.address), 3_000_000, 'a used code credits nothing more');

      const refCode = await admin('ref-codes', 'create', '--wallet', payer.address);
      const referred = await h.chain.newAccount();
      const created = json(await wallet(['--json', 'keys', 'create', '--ref-code', refCode], referred.privateKey));
      assert.match(created.key, /^sk-/);
      const attribution = await h.gw.services.storage.db
        .selectFrom('referral_attributions')
        .selectAll()
        .where('wallet', '=', referred.address.toLowerCase())
        .executeTakeFirst();
      assert.equal(attribution?.referrer, payer.address.toLowerCase());
      assert.equal(attribution?.code, refCode);
    } finally {
      rmSync(dirname(configPath), { recursive: true, force: true });
    }
  });

  test('usage and topups report the balance, per-key usage and the credited payments', async () => {
    const usage = json(await wallet(['--json', 'usage']));
    assert.equal(usage.wallet, payer.address.toLowerCase());
    assert.equal(usage.balance_usdc, 7_500_000);
    assert.equal(usage.keys.length, 1);
    const text = await wallet(['usage']);
    assert.match(text.stdout, /^balance    \$7\.500000 \(locked \$0\.000000, available \$7\.500000\)$/m);
    const topups = json(await wallet(['--json', 'topups'])).topups;
    assert.deepEqual(
      topups.map((t: { status: string; credited_usdc: number }) => [t.status, t.credited_usdc]),
      [
        ['credited', 2_500_000],
        ['credited', 5_000_000],
      ],
    );
  });

  test('bad input is refused with a clear message, exit code 2, and nothing is paid', async () => {
    const balanceBefore = await h.balance(payer.address);
    const broke = await h.chain.newAccount();
    const cases: Array<[string, Promise<CliResult>, RegExp]> = [
      ['no key in the environment', wallet(['usage'], null), /set TOLLGATE_WALLET_KEY to the wallet's private key/],
      ['a malformed key', wallet(['usage'], '0x1234'), /TOLLGATE_WALLET_KEY is not a private key/],
      ['--usd not a number', wallet(['topup', '--usd', 'five']), /--usd must be a positive amount/],
      ['--usd zero', wallet(['topup', '--usd', '0']), /--usd must be a positive amount/],
      ['--usd missing', wallet(['topup']), /required option '--usd <amount>'/],
      ['--method unknown', wallet(['topup', '--usd', '5', '--method', 'wire']), /--method must be eip3009 or permit2/],
      ['below the minimum top-up', wallet(['topup', '--usd', '0.5']), /VALIDATION_ERROR: .*amount/],
      ['a key id that is not a number', wallet(['keys', 'revoke', 'abc']), /the key id must be a positive integer/],
      ["a key id that is not the wallet's", wallet(['keys', 'revoke', '99999']), /NOT_FOUND: no API key 99999 belongs to this wallet/],
      // The advice fits the cause: signing again cannot help a wallet that lacks the token.
      [
        'a wallet without tokens',
        wallet(['topup', '--usd', '1'], broke.privateKey),
        new RegExp(
          `PAYMENT_REJECTED: the paying wallet ${broke.address} does not hold 1 USD Coin \\(0x[0-9a-fA-F]{40} on eip155:84532\\); nothing was credited\\. Add USD Coin to that wallet`,
          'i',
        ),
      ],
      [
        'a gateway that is not a URL',
        runTollgate(['wallet', '--gateway', 'not a url', 'usage'], { TOLLGATE_WALLET_KEY: payer.privateKey }),
        /--gateway must be a URL/,
      ],
      [
        'a gateway that is not running',
        runTollgate(['wallet', '--gateway', 'http://127.0.0.1:9', 'usage'], { TOLLGATE_WALLET_KEY: payer.privateKey }),
        /UNREACHABLE: cannot reach the gateway at http:\/\/127\.0\.0\.1:9/,
      ],
    ];
    for (const [what, pending, message] of cases) {
      const res = await pending;
      outputs.push(res);
      assert.equal(res.code, 2, `${what}: exit code (stderr: ${res.stderr})`);
      assert.match(res.stderr, message, what);
      assert.ok(!res.stderr.includes('    at '), `${what}: no stack trace`);
    }
    assert.equal(await h.balance(payer.address), balanceBefore);
    assert.equal(await h.balance(broke.address), 0);
  });

  test('the private key never appears in any output', () => {
    assert.ok(outputs.length >= 15);
    for (const o of outputs) {
      for (const text of [o.stdout, o.stderr]) {
        assert.ok(!text.includes(payer.privateKey.slice(2)), 'private key leaked');
      }
    }
  });
});

describe('chooseOffer: the wallet signs only for the amount the user typed', () => {
  const offer = (over: Partial<PaymentRequirements> & { extra?: Record<string, unknown> }): PaymentRequirements =>
    ({
      scheme: 'exact',
      network: 'eip155:84532',
      asset: '0x0000000000000000000000000000000000000001',
      amount: '5000000',
      payTo: '0x0000000000000000000000000000000000000002',
      maxTimeoutSeconds: 300,
      extra: { name: 'USD Coin', version: '2', decimals: 6, assetTransferMethod: 'eip3009' },
      ...over,
    }) as PaymentRequirements;

  test("accepts the exact amount in the token's decimals", () => {
    assert.equal(chooseOffer([offer({})], 5).amount, '5000000');
    assert.equal(chooseOffer([offer({ amount: '2500000000000000000', extra: { decimals: 18 } })], 2.5).amount, '2500000000000000000');
  });
  test('refuses an offer for more than asked, one without decimals, or a missing method', () => {
    assert.throws(() => chooseOffer([offer({ amount: '50000000' })], 5), /asks for 50000000 units .* for \$5 \(expected 5000000\); refusing to sign/);
    assert.throws(() => chooseOffer([offer({ extra: { name: 'USD Coin' } })], 5), /does not state its decimals/);
    assert.throws(() => chooseOffer([offer({})], 5, 'permit2'), /does not accept permit2 payments \(it offers: eip3009\)/);
  });
});
