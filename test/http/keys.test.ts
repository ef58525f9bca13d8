import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, afterEach, before, describe, test } from 'node:test';
import { createRedeemCodes, createReferralCode, hashRedeemCode } from '../../src/codes/codes.ts';
import { ENGINES } from '../support/engines.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { newAccount, proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';
import type { PrivateKeyAccount } from 'viem/accounts';

for (const engine of ENGINES) {
  describe(`API keys (${engine})`, () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({ engine, config: { keys: { maxActivePerWallet: 3 } } });
    });
    afterEach(() => gw.assertLedger());
    after(() => gw.stop());

    const db = () => gw.services.storage.db;

    async function create(account: PrivateKeyAccount, extra: Record<string, unknown> = {}) {
      return call(gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), ...extra });
    }
    async function list(account: PrivateKeyAccount) {
      return call(gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(account))}`);
    }
    async function revoke(account: PrivateKeyAccount, id: number | string) {
      return call(gw.url, 'DELETE', `/v1/auth/keys/${id}`, await siweProof(account));
    }
    const usageWithKey = (account: PrivateKeyAccount, key: string) =>
      call(gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${key}` });

    test('create returns 201 with the key once; the database holds only its HMAC', async () => {
      const account = newAccount();
      const res = await create(account, { label: 'laptop' });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(Object.keys(res.body).sort(), ['created_at', 'id', 'key', 'label']);
      assert.match(res.body.key, /^sk-[A-Za-z0-9_-]{43}$/);
      assert.equal(res.body.label, 'laptop');
      assert.ok(Number.isInteger(res.body.id));
      assert.ok(Math.abs(Date.parse(res.body.created_at) - Date.now()) < 60_000);

      const row = await db().selectFrom('api_keys').selectAll().where('id', '=', res.body.id).executeTakeFirstOrThrow();
      assert.equal(row.wallet, account.address.toLowerCase());
      assert.equal(row.key_hash, createHmac('sha256', gw.services.keySecret).update(res.body.key).digest('hex'));
      const everything =
        JSON.stringify(await db().selectFrom('api_keys').selectAll().execute()) + JSON.stringify(await db().selectFrom('settings').selectAll().execute());
      assert.ok(!everything.includes(res.body.key), 'the plain key is stored nowhere');
      assert.ok(!gw.logs().includes(res.body.key), 'the plain key is never logged');
    });

    test("list shows the wallet's keys without secrets; revoke stops a key at once", async () => {
      const account = newAccount();
      const a = (await create(account, { label: 'a' })).body;
      const b = (await create(account)).body;
      assert.equal(b.label, '');
      assert.equal((await usageWithKey(account, a.key)).status, 200);

      const before = await list(account);
      assert.equal(before.status, 200);
      assert.deepEqual(
        before.body.data.map((k: any) => [k.id, k.label, k.revoked_at]),
        [
          [a.id, 'a', null],
          [b.id, '', null],
        ],
      );
      assert.ok(before.body.data.every((k: any) => !('key' in k) && k.last4 && k.created_at));

      const revoked = await revoke(account, a.id);
      assert.equal(revoked.status, 200);
      assert.deepEqual(revoked.body, { revoked: true });
      const denied = await usageWithKey(account, a.key);
      assert.equal(denied.status, 401);
      assert.equal(denied.body.error, 'UNAUTHORIZED');
      assert.equal((await usageWithKey(account, b.key)).status, 200);

      const after = await list(account);
      const revokedEntry = after.body.data.find((k: any) => k.id === a.id);
      assert.ok(revokedEntry.revoked_at && Date.parse(revokedEntry.revoked_at) > 0);
      assert.equal((await revoke(account, a.id)).status, 200, 'revoking twice is idempotent');
    });

    test("another wallet's key or an unknown id is 404; a non-integer id is 400", async () => {
      const owner = newAccount();
      const other = newAccount();
      const key = (await create(owner)).body;
      const foreign = await revoke(other, key.id);
      assert.equal(foreign.status, 404);
      assert.equal(foreign.body.error, 'NOT_FOUND');
      assert.equal((await usageWithKey(owner, key.key)).status, 200, 'the key still works');
      assert.equal((await revoke(owner, 987654321)).status, 404);
      for (const bad of ['abc', '1.5', '-3', '0', '1e3']) {
        const res = await revoke(owner, bad);
        assert.equal(res.status, 400, `id ${bad}`);
        assert.equal(res.body.error, 'VALIDATION_ERROR');
      }
    });

    test('the active-key cap gives 400, and a revoked key frees a slot', async () => {
      const account = newAccount();
      const ids: number[] = [];
      for (let i = 0; i < 3; i++) ids.push((await create(account)).body.id);
      const refused = await create(account);
      assert.equal(refused.status, 400);
      assert.match(refused.body.message, /already has 3 active API keys/);
      await revoke(account, ids[0]!);
      assert.equal((await create(account)).status, 201);
    });

    test('a label that is too long or not a string is 400', async () => {
      const account = newAccount();
      assert.equal((await create(account, { label: 'x'.repeat(101) })).status, 400);
      assert.equal((await create(account, { label: 42 })).status, 400);
    });

    test('redeem_code credits the wallet once, atomically with the key', async () => {
      const account = newAccount();
      const [code] = await createRedeemCodes(db(), 2_500_000, 1);
      const res = await create(account, { redeem_code: code });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.redeemed_credit_usdc, 2_500_000);
      const usage = await usageWithKey(account, res.body.key);
      assert.equal(usage.body.balance_usdc, 2_500_000);

      const keysBefore = (await list(account)).body.data.length;
      const again = await create(newAccount(), { redeem_code: code });
      assert.equal(again.status, 400);
      assert.match(again.body.message, /unknown or has already been used/);
      const unknown = await create(account, { redeem_code: 'rc-AAAAAAAAAAAAAAAAAAAAAA' });
      assert.equal(unknown.status, 400);
      assert.equal((await list(account)).body.data.length, keysBefore, 'a failed code creates no key');
      assert.equal((await create(account, { redeem_code: 'not-a-code' })).status, 400);
    });

    test('one redeem code raced by ten wallets is credited exactly once', async () => {
      const [code] = await createRedeemCodes(db(), 1_000_000, 1);
      const results = await Promise.all(Array.from({ length: 10 }, async () => create(newAccount(), { redeem_code: code })));
      assert.equal(results.filter((r) => r.status === 201).length, 1);
      assert.equal(results.filter((r) => r.status === 400).length, 9);
      const row = await db().selectFrom('redeem_codes').selectAll().where('code_hash', '=', hashRedeemCode(code!)).executeTakeFirstOrThrow();
      const credits = await db().selectFrom('ledger_entries').selectAll().where('reference', '=', `redeem:${row.id}`).execute();
      assert.equal(credits.length, 1);
      assert.equal(Number(credits[0]!.amount_usdc), 1_000_000);
      const winner = results.find((r) => r.status === 201)!;
      assert.equal(credits[0]!.wallet, row.redeemed_by);
      assert.equal(winner.body.redeemed_credit_usdc, 1_000_000);
    });

    test('a redeem code refused by the key cap stays unused', async () => {
      const account = newAccount();
      for (let i = 0; i < 3; i++) await create(account);
      const [code] = await createRedeemCodes(db(), 700_000, 1);
      assert.equal((await create(account, { redeem_code: code })).status, 400);
      const other = await create(newAccount(), { redeem_code: code });
      assert.equal(other.status, 201);
      assert.equal(other.body.redeemed_credit_usdc, 700_000);
    });

    test('ref_code records the referrer once; self, unknown and combined codes are 400', async () => {
      const referrer = newAccount();
      const referred = newAccount();
      const code = await createReferralCode(db(), referrer.address);
      const other = await createReferralCode(db(), newAccount().address);
      assert.equal((await create(referred, { ref_code: code })).status, 201);
      assert.equal((await create(referred, { ref_code: other })).status, 201, 'a later code is accepted but changes nothing');
      const rows = await db().selectFrom('referral_attributions').selectAll().where('wallet', '=', referred.address.toLowerCase()).execute();
      assert.deepEqual(
        rows.map((r) => [r.referrer, r.code]),
        [[referrer.address.toLowerCase(), code]],
      );

      const self = await create(referrer, { ref_code: code });
      assert.equal(self.status, 400);
      assert.match(self.body.message, /cannot refer itself/);
      const unknown = await create(newAccount(), { ref_code: 'ref-zzzzzzzzzz' });
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.message, /ref_code is unknown/);
      const [redeem] = await createRedeemCodes(db(), 1_000_000, 1);
      const both = await create(newAccount(), { ref_code: code, redeem_code: redeem });
      assert.equal(both.status, 400);
      assert.match(both.body.message, /cannot be used together/);
    });
  });
}

describe('the key-hashing secret', () => {
  test('is generated on first start, persisted, and reused after a restart', async () => {
    const first = await startTestGateway({ engine: 'sqlite' });
    const account = newAccount();
    const key = (await call(first.url, 'POST', '/v1/auth/keys', await createKeyProof(account))).body.key;
    const url = first.config.database.url;
    await first.stop();
    const second = await startTestGateway({ engine: 'sqlite', databaseUrl: url });
    try {
      const res = await call(second.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${key}` });
      assert.equal(res.status, 200, res.text);
    } finally {
      await second.stop();
    }
  });

  test('comes from the environment variable the config names when set', async () => {
    const gw = await startTestGateway({ engine: 'sqlite', config: { keys: { secretEnv: 'MY_KEY_SECRET' } }, env: { MY_KEY_SECRET: 'operator-chosen-secret' } });
    try {
      const res = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount()));
      const row = await gw.services.storage.db.selectFrom('api_keys').select('key_hash').where('id', '=', res.body.id).executeTakeFirstOrThrow();
      assert.equal(row.key_hash, createHmac('sha256', 'operator-chosen-secret').update(res.body.key).digest('hex'));
      const stored = await gw.services.storage.db.selectFrom('settings').selectAll().execute();
      assert.equal(stored.length, 0, 'no secret is generated when one is configured');
    } finally {
      await gw.stop();
    }
  });
});
