import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { ENGINES } from '../support/engines.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { newAccount, proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';
import { createRedeemCodes } from '../../src/codes/codes.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { usageRecord } from '../support/ledger.ts';

for (const engine of ENGINES) {
  describe(`GET /v1/usage/:wallet (${engine})`, () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({ engine });
    });
    afterEach(() => gw.assertLedger());
    after(() => gw.stop());

    async function walletWithKeys() {
      const account = newAccount();
      const [code] = await createRedeemCodes(gw.services.storage.db, 3_000_000, 1);
      const a = (await call(gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), label: 'one', redeem_code: code })).body;
      const b = (await call(gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), label: 'two' })).body;
      return { account, a, b };
    }

    test('with an API key: balance fields and every key, revoked ones included', async () => {
      const { account, a, b } = await walletWithKeys();
      await call(gw.url, 'DELETE', `/v1/auth/keys/${b.id}`, await siweProof(account));
      const res = await call(gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${a.key}` });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.wallet, account.address.toLowerCase());
      assert.equal(res.body.balance_usdc, 3_000_000);
      assert.equal(res.body.locked_usdc, 0);
      assert.equal(res.body.available_usdc, 3_000_000);
      assert.equal(res.body.keys.length, 2);
      const [one, two] = res.body.keys;
      assert.deepEqual(
        { ...one, created_at: undefined },
        {
          api_key_id: a.id,
          label: 'one',
          created_at: undefined,
          revoked_at: null,
          request_count: 0,
          total_prompt_tokens: 0,
          total_completion_tokens: 0,
          total_charged_usdc: 0,
          total_platform_revenue_usd: 0,
        },
      );
      assert.ok(two.revoked_at);
    });

    test('the address is matched case-insensitively', async () => {
      const { account, a } = await walletWithKeys();
      const res = await call(gw.url, 'GET', `/v1/usage/${account.address.toLowerCase()}`, undefined, { authorization: `Bearer ${a.key}` });
      assert.equal(res.status, 200);
    });

    test('with a SIWE proof in the query string', async () => {
      const { account } = await walletWithKeys();
      const res = await call(gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery(await siweProof(account))}`);
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.keys.length, 2);
    });

    test("another wallet's key or proof is 401, and so is no credential", async () => {
      const { account, a } = await walletWithKeys();
      const stranger = newAccount();
      const byKey = await call(gw.url, 'GET', `/v1/usage/${stranger.address}`, undefined, { authorization: `Bearer ${a.key}` });
      assert.equal(byKey.status, 401);
      assert.match(byKey.body.message, /belongs to another wallet/);
      const byProof = await call(gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery(await siweProof(stranger))}`);
      assert.equal(byProof.status, 401);
      assert.match(byProof.body.message, /signed by another wallet/);
      const none = await call(gw.url, 'GET', `/v1/usage/${account.address}`);
      assert.equal(none.status, 401);
      for (const header of ['Bearer sk-not-a-real-key', 'Basic abc', 'Bearer', `Bearer ${a.key}x`]) {
        const res = await call(gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: header });
        assert.equal(res.status, 401, header);
        assert.equal(res.body.error, 'UNAUTHORIZED');
      }
    });

    test('a malformed wallet address is 400', async () => {
      for (const bad of ['0x123', 'abc', `0x${'g'.repeat(40)}`, `0x${'a'.repeat(41)}`]) {
        const res = await call(gw.url, 'GET', `/v1/usage/${bad}`);
        assert.equal(res.status, 400, bad);
        assert.equal(res.body.error, 'VALIDATION_ERROR');
      }
    });

    test('a wallet never seen has a zero balance and no keys', async () => {
      const account = newAccount();
      const res = await call(gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery(await siweProof(account))}`);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { wallet: account.address.toLowerCase(), balance_usdc: 0, locked_usdc: 0, available_usdc: 0, keys: [] });
    });

    test('counters come from recorded requests, revenue as float USD', async () => {
      const { account, a } = await walletWithKeys();
      const wallet = account.address.toLowerCase();
      // Recorded the way the gateway records them (reserve, then settle), which also keeps the
      // per-key totals the route reads.
      const record = async (requestId: string, promptTokens: number, completionTokens: number, charge: number, cost: number) => {
        assert.ok(await reserve(gw.services.storage, { wallet, apiKeyId: a.id, requestId, amountUsdc: 10_000, leaseMs: 60_000 }));
        const usage = {
          ...usageRecord(requestId, wallet),
          apiKeyId: a.id,
          model: 'openai/gpt-4o-mini',
          provider: 'openai',
          promptTokens,
          completionTokens,
          providerCostUsdc: cost,
        };
        assert.equal((await finishReservation(gw.services.storage, requestId, charge, usage)).chargedUsdc, charge);
      };
      await record(`r1-${randomUUID()}`, 100, 20, 1200, 1000);
      await record(`r2-${randomUUID()}`, 50, 5, 600, 500);
      const res = await call(gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${a.key}` });
      const one = res.body.keys.find((k: any) => k.api_key_id === a.id);
      assert.equal(one.request_count, 2);
      assert.equal(one.total_prompt_tokens, 150);
      assert.equal(one.total_completion_tokens, 25);
      assert.equal(one.total_charged_usdc, 1800);
      assert.equal(one.total_platform_revenue_usd, 0.0003);
    });
  });
}
