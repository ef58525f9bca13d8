import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { DAY_MS } from '../../src/ledger/days.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { reserve } from '../../src/ledger/operations/reserve.ts';
import { backfillUsageDaily } from '../../src/storage/migrations/007-dashboard.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { usageRecord } from '../support/ledger.ts';
import { proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';

/**
 * GET /v1/usage/:wallet/daily: the dashboard's chart, per UTC day and key, from running totals
 * written with each usage row (never a scan of request_usage), and audited by checkLedger.
 */
for (const engine of ENGINES) {
  describe(`GET /v1/usage/:wallet/daily (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const chat = (key: string) =>
      call(
        h.gw.url,
        'POST',
        '/v1/chat/completions',
        { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 },
        { authorization: `Bearer ${key}` },
      );
    const today = () => new Date().toISOString().slice(0, 10);

    test("today's requests per key, with the tokens and charges the usage read reports", async () => {
      const first = await h.wallet(5_000_000);
      const second = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(first.account)), label: 'second' });
      for (const key of [first.key, first.key, second.body.key]) assert.equal((await chat(key)).status, 200);

      const res = await call(h.gw.url, 'GET', `/v1/usage/${first.account.address}/daily?days=30`, undefined, { authorization: `Bearer ${first.key}` });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.days, 30);
      assert.equal(res.body.to, today());
      assert.deepEqual(
        res.body.data.map((r: { date: string; api_key_id: number; requests: number }) => [r.date, r.api_key_id, r.requests]),
        [
          [today(), first.keyId, 2],
          [today(), second.body.id, 1],
        ],
      );
      const usage = await call(h.gw.url, 'GET', `/v1/usage/${first.account.address}`, undefined, { authorization: `Bearer ${first.key}` });
      for (const k of usage.body.keys) {
        const day = res.body.data.find((r: { api_key_id: number }) => r.api_key_id === k.api_key_id);
        assert.equal(day.charged_usdc, k.total_charged_usdc);
        assert.equal(day.prompt_tokens, k.total_prompt_tokens);
        assert.equal(day.completion_tokens, k.total_completion_tokens);
        assert.ok(day.charged_usdc > 0);
      }
      // The same read with a SIWE proof instead of a key.
      const withProof = await call(h.gw.url, 'GET', `/v1/usage/${first.account.address}/daily?${proofQuery(await siweProof(first.account))}`);
      assert.deepEqual(withProof.body.data, res.body.data);
    });

    test('requests are counted on their own UTC day, and `days` bounds the window', async () => {
      const { account, key, keyId } = await h.wallet(5_000_000);
      const wallet = account.address.toLowerCase();
      const now = Date.now();
      for (const daysAgo of [0, 1, 1, 40]) {
        const requestId = `${wallet}-${daysAgo}-${Math.random()}`;
        assert.ok(await reserve(h.gw.services.storage, { wallet, apiKeyId: keyId, requestId, amountUsdc: 1000, leaseMs: 60_000 }));
        await finishReservation(h.gw.services.storage, requestId, 100, { ...usageRecord(requestId, wallet), apiKeyId: keyId }, now - daysAgo * DAY_MS);
      }
      const read = async (days?: number) =>
        (await call(h.gw.url, 'GET', `/v1/usage/${wallet}/daily${days ? `?days=${days}` : ''}`, undefined, { authorization: `Bearer ${key}` })).body;
      const dates = (body: { data: { date: string; requests: number }[] }) => body.data.map((r) => [r.date, r.requests]);
      const iso = (daysAgo: number) => new Date(now - daysAgo * DAY_MS).toISOString().slice(0, 10);
      assert.deepEqual(dates(await read()), [
        [iso(1), 2],
        [iso(0), 1],
      ]);
      assert.deepEqual(dates(await read(1)), [[iso(0), 1]]);
      assert.deepEqual(dates(await read(41)), [
        [iso(40), 1],
        [iso(1), 2],
        [iso(0), 1],
      ]);
    });

    test('days outside 1..90 or not a number is 400', async () => {
      const { account, key } = await h.wallet(0);
      for (const days of ['0', '91', 'abc', '1.5', '-3']) {
        const res = await call(h.gw.url, 'GET', `/v1/usage/${account.address}/daily?days=${days}`, undefined, { authorization: `Bearer ${key}` });
        assert.equal(res.status, 400, days);
        assert.match(res.body.message, /days must be a whole number from 1 to 90/);
      }
    });

    test("another wallet's key is 401; no credential is 401", async () => {
      const mine = await h.wallet(0);
      const other = await h.wallet(0);
      assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${other.account.address}/daily`, undefined, { authorization: `Bearer ${mine.key}` })).status, 401);
      assert.equal((await call(h.gw.url, 'GET', `/v1/usage/${other.account.address}/daily`)).status, 401);
    });

    test('the ledger check reports daily totals that disagree with the usage rows', async () => {
      const { account, key } = await h.wallet(5_000_000);
      assert.equal((await chat(key)).status, 200);
      const wallet = account.address.toLowerCase();
      const db = h.gw.services.storage.db;
      await sql`update usage_daily set charged_usdc = charged_usdc + 1 where wallet = ${wallet}`.execute(db);
      const problems = (await checkLedger(db)).problems;
      assert.equal(problems.length, 1, problems.join('\n'));
      assert.match(
        problems[0]!,
        new RegExp(`wallet ${wallet}, day ${today()}, api key #\\d+: daily usage totals disagree with request_usage \\(charged_usdc \\d+ != \\d+\\)`),
      );
      // The migration's backfill rebuilds them from the rows.
      await backfillUsageDaily(db);
      assert.deepEqual((await checkLedger(db)).problems, []);
    });
  });
}
