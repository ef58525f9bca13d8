import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { planChat } from '../../src/metered/plan/plan.ts';
import { sweepExpiredReservations } from '../../src/ledger/operations/expire.ts';
import { finishReservation } from '../../src/ledger/operations/finish.ts';
import { tryReserve } from '../../src/ledger/operations/reserve.ts';
import { applySettle } from '../../src/ledger/spool/apply-settle.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { MODELS, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES, freshDatabaseUrl } from '../support/engines.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { assertLedgerConsistent, fundedWallet, usageRecord } from '../support/ledger.ts';
import { newAccount, siweProof, createKeyProof } from '../support/siwe.ts';

/**
 * Per-key spend controls as an attacker holding a key, or someone else's wallet, would
 * probe them: races against the limit, changes mid-flight, periods rolling over, expiry, the model
 * list, and PATCH proofs that are not the owner's or not fresh.
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 };

/** What one BODY request reserves, and the provider usage that makes its charge exactly that. */
function exactUsage(h: ChatHarness) {
  const plan = planChat(structuredClone(BODY), h.gw.services.catalog, h.gw.services.config);
  return { reserve: plan.reservationUsdc, usage: { prompt_tokens: plan.promptUpperBound, completion_tokens: BODY.max_tokens } };
}

async function patchKey(
  url: string,
  account: Parameters<typeof siweProof>[0],
  id: number,
  fields: Record<string, unknown>,
  proof?: { message: string; signature: string },
) {
  return call(url, 'PATCH', `/v1/auth/keys/${id}`, { ...(proof ?? (await siweProof(account, { action: 'loosen-key' }))), ...fields });
}

for (const engine of ENGINES) {
  describe(`attack: key spend limits (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine);
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const chat = (key: string, body: Record<string, unknown> = BODY) =>
      call(h.gw.url, 'POST', '/v1/chat/completions', body, { authorization: `Bearer ${key}` });

    test('a limit covering exactly K requests admits exactly K of 200 sent at once', async () => {
      const { reserve, usage } = exactUsage(h);
      // Each admitted request is charged exactly its reservation, so a finished one frees no room:
      // however the 200 interleave, K is the answer.
      h.fake.behaviour = { usage, delayMs: 300 };
      const K = 7;
      const w = await h.wallet(1_000_000_000);
      const limit = K * reserve + Math.floor(reserve / 2);
      assert.equal((await patchKey(h.gw.url, w.account, w.keyId, { spend_limit_usdc: limit, spend_limit_period: 'day' })).status, 200);
      const before = h.fake.received.length;
      const results = await Promise.all(Array.from({ length: 200 }, () => chat(w.key)));
      const ok = results.filter((r) => r.status === 200);
      const refused = results.filter((r) => r.status === 402);
      assert.equal(ok.length, K, `statuses: ${JSON.stringify(results.map((r) => r.status))}`);
      assert.equal(refused.length, 200 - K);
      for (const r of refused) assert.equal(r.body.error, 'KEY_LIMIT_EXCEEDED');
      assert.equal(h.fake.received.length - before, K, 'the provider saw only the admitted requests');
      const balance = await h.balance(w.account);
      assert.equal(balance.balance_usdc, 1_000_000_000 - K * reserve);
      assert.equal(balance.locked_usdc, 0);
      h.fake.behaviour = {};
    });

    test('a limit lowered mid-flight refuses the next request; the ones in flight finish and count', async () => {
      const { reserve, usage } = exactUsage(h);
      h.fake.behaviour = { usage, delayMs: 1_500 };
      const w = await h.wallet(1_000_000_000);
      assert.equal((await patchKey(h.gw.url, w.account, w.keyId, { spend_limit_usdc: 10 * reserve })).status, 200);
      const inFlight = [chat(w.key), chat(w.key)];
      // Once both hold their reservations, lower the limit to exactly what they hold.
      await waitFor(async () => (await listed(w)).reserved_usdc === 2 * reserve);
      assert.equal((await patchKey(h.gw.url, w.account, w.keyId, { spend_limit_usdc: 2 * reserve })).status, 200);
      const next = await chat(w.key);
      assert.equal(next.status, 402);
      assert.equal(next.body.error, 'KEY_LIMIT_EXCEEDED');
      assert.equal(next.body.limit_usdc, 2 * reserve);
      for (const r of await Promise.all(inFlight)) assert.equal(r.status, 200);
      const after = await listed(w);
      assert.equal(after.spend_usdc, 2 * reserve);
      assert.equal(after.reserved_usdc, 0);
      h.fake.behaviour = {};
    });

    async function listed(w: { account: Parameters<typeof siweProof>[0]; keyId: number }) {
      const res = await call(h.gw.url, 'GET', `/v1/auth/keys?${new URLSearchParams(await siweProof(w.account))}`);
      assert.equal(res.status, 200, res.text);
      return res.body.data.find((k: { id: number }) => k.id === w.keyId);
    }

    test('a key outside its model list is 403 before anything goes upstream, streaming included', async () => {
      const w = await h.wallet(10_000_000);
      assert.equal((await patchKey(h.gw.url, w.account, w.keyId, { models: ['thinker'] })).status, 200);
      const before = h.fake.received.length;
      for (const stream of [false, true]) {
        const res = await chat(w.key, { ...BODY, stream });
        assert.equal(res.status, 403, res.text);
        assert.equal(res.body.error, 'MODEL_NOT_ALLOWED');
        assert.deepEqual(res.body.allowed_models, ['fake/thinker']);
        assert.match(res.body.message, /fake\/thinker/);
      }
      assert.equal(h.fake.received.length, before);
      assert.equal((await chat(w.key, { ...BODY, model: 'thinker' })).status, 200);
      assert.equal((await h.balance(w.account)).locked_usdc, 0);
    });

    test('an expired key is 401 and says so; the owner can extend it', async () => {
      const account = newAccount();
      await adjustBalance(h.gw.services.storage.db, { wallet: account.address, amountUsdc: 1_000_000 });
      // Long enough for the key to be created and used before it expires on a loaded machine.
      const expires = new Date(Date.now() + 5_000).toISOString();
      const created = await call(h.gw.url, 'POST', '/v1/auth/keys', { ...(await createKeyProof(account)), expires_at: expires });
      assert.equal(created.status, 201, created.text);
      assert.equal((await chat(created.body.key)).status, 200);
      await new Promise((r) => setTimeout(r, Date.parse(expires) + 100 - Date.now()));
      const before = h.fake.received.length;
      const refused = await chat(created.body.key);
      assert.equal(refused.status, 401);
      assert.equal(refused.body.error, 'UNAUTHORIZED');
      assert.match(refused.body.message, /expired/);
      assert.equal(h.fake.received.length, before);
      const usage = await call(h.gw.url, 'GET', `/v1/usage/${account.address}`, undefined, { authorization: `Bearer ${created.body.key}` });
      assert.equal(usage.status, 401, 'an expired key reads nothing either');
      const extended = await patchKey(h.gw.url, account, created.body.id, { expires_at: new Date(Date.now() + 3_600_000).toISOString() });
      assert.equal(extended.status, 200, extended.text);
      assert.equal((await chat(created.body.key)).status, 200);
    });

    test("PATCH of another wallet's key is 404 and changes nothing; a replayed PATCH proof is 401", async () => {
      const owner = await h.wallet(1_000_000);
      const attacker = newAccount();
      const foreign = await patchKey(h.gw.url, attacker, owner.keyId, { spend_limit_usdc: null, models: null });
      assert.equal(foreign.status, 404);
      assert.equal((await patchKey(h.gw.url, owner.account, owner.keyId, { spend_limit_usdc: 5_000 })).status, 200);
      const again = await patchKey(h.gw.url, attacker, owner.keyId, { spend_limit_usdc: null });
      assert.equal(again.status, 404);
      assert.equal((await listed(owner)).spend_limit_usdc, 5_000, "the attacker's PATCH changed nothing");

      // Raising the cap loosens the key: the proof is signed for that.
      const proof = await siweProof(owner.account, { action: 'loosen-key' });
      assert.equal((await patchKey(h.gw.url, owner.account, owner.keyId, { spend_limit_usdc: 6_000 }, proof)).status, 200);
      const replay = await patchKey(h.gw.url, owner.account, owner.keyId, { spend_limit_usdc: null }, proof);
      assert.equal(replay.status, 401);
      assert.equal((await listed(owner)).spend_limit_usdc, 6_000, 'the replay changed nothing');
      const none = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${owner.keyId}`, { spend_limit_usdc: null });
      assert.equal(none.status, 401, 'no proof, no change');
    });
  });

  describe(`key spend buckets in the ledger (${engine})`, () => {
    let storage: Storage;
    before(async () => {
      storage = openStorage(await freshDatabaseUrl(engine));
      const { migrateToLatest } = await import('../../src/storage/migrate.ts');
      await migrateToLatest(storage);
    });
    afterEach(() => assertLedgerConsistent(storage.db));
    after(() => storage.close());

    async function limitedKey(wallet: string, limit: number, period: 'total' | 'day' | 'month') {
      const row = await storage.db
        .insertInto('api_keys')
        .values({
          wallet,
          key_hash: `h-${Math.random()}`,
          prefix: 'sk-test',
          last4: 'abcd',
          label: '',
          created_at: 0,
          revoked_at: null,
          last_used_at: null,
          spend_limit_usdc: limit,
          spend_limit_period: period,
          allowed_models: null,
          expires_at: null,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      return Number(row.id);
    }
    const req = (wallet: string, apiKeyId: number, requestId: string, amountUsdc: number, leaseMs = 60_000) => ({
      wallet,
      apiKeyId,
      requestId,
      amountUsdc,
      leaseMs,
      keyHasLimit: true,
    });

    test('a new UTC day starts at 0; a reservation from the old day settles in the old day', async () => {
      const wallet = await fundedWallet(storage.db, 10_000);
      const key = await limitedKey(wallet, 1_000, 'day');
      const lastMs = Date.UTC(2030, 0, 1) - 1;
      assert.equal((await tryReserve(storage, req(wallet, key, `${wallet}-old`, 1_000), lastMs)).ok, true);
      const full = await tryReserve(storage, req(wallet, key, `${wallet}-full`, 1), lastMs);
      assert.equal(full.ok, false);
      assert.ok(!full.ok && full.refused === 'key_limit' && full.resetsAt === Date.UTC(2030, 0, 1));
      // One millisecond later it is a new day: its bucket is empty.
      assert.equal((await tryReserve(storage, req(wallet, key, `${wallet}-new`, 1_000), lastMs + 1)).ok, true);
      // The old day's request settles after midnight, for less than it reserved.
      await finishReservation(storage, `${wallet}-old`, 600, usageRecord(`${wallet}-old`, wallet), lastMs + 5_000);
      const rows = await storage.db.selectFrom('key_spend').selectAll().where('api_key_id', '=', key).orderBy('period').execute();
      const byPeriod = Object.fromEntries(rows.map((r) => [r.period, [Number(r.spent_usdc), Number(r.locked_usdc)]]));
      assert.deepEqual(byPeriod['day:2029-12-31'], [600, 0], 'charged to the day it was reserved in');
      assert.deepEqual(byPeriod['day:2030-01-01'], [0, 1_000], 'the new day holds only its own request');
      assert.deepEqual(byPeriod.total, [600, 1_000]);
      // The new day is full: its 1,000 is still in flight, whatever the old day settled.
      assert.equal((await tryReserve(storage, req(wallet, key, `${wallet}-more`, 1), lastMs + 6_000)).ok, false);
      await finishReservation(storage, `${wallet}-new`, 0, usageRecord(`${wallet}-new`, wallet), lastMs + 7_000);
    });

    test('a month limit counts across days, and a swept or late-charged request keeps the count exact', async () => {
      const wallet = await fundedWallet(storage.db, 10_000);
      const key = await limitedKey(wallet, 3_000, 'month');
      const t0 = Date.UTC(2031, 4, 10);
      assert.equal((await tryReserve(storage, req(wallet, key, `${wallet}-a`, 1_000, 10), t0)).ok, true);
      assert.equal((await tryReserve(storage, req(wallet, key, `${wallet}-b`, 1_000), t0 + 86_400_000)).ok, true);
      // The sweeper releases a: its room comes back.
      assert.equal((await sweepExpiredReservations(storage.db, t0 + 1_000)) >= 1, true);
      await assertLedgerConsistent(storage.db);
      assert.equal((await tryReserve(storage, req(wallet, key, `${wallet}-c`, 2_000), t0 + 2 * 86_400_000)).ok, true);
      assert.equal((await tryReserve(storage, req(wallet, key, `${wallet}-d`, 1), t0 + 2 * 86_400_000)).ok, false);
      // a's answer had been delivered (a stream): its spooled settle is charged late, in its month,
      // but only within the room b and c left in the limit (none: a shortfall for the operator).
      const late = await applySettle(storage, { requestId: `${wallet}-a`, wallet, chargeUsdc: 400, usage: usageRecord(`${wallet}-a`, wallet) });
      assert.equal(late.kind, 'late');
      assert.ok(late.kind === 'late' && late.outcome.shortfallUsdc === 400);
      const month = await storage.db
        .selectFrom('key_spend')
        .selectAll()
        .where('api_key_id', '=', key)
        .where('period', '=', 'month:2031-05')
        .executeTakeFirstOrThrow();
      assert.deepEqual([Number(month.spent_usdc), Number(month.locked_usdc)], [0, 3_000]);
      await finishReservation(storage, `${wallet}-b`, 1_000, usageRecord(`${wallet}-b`, wallet));
      await finishReservation(storage, `${wallet}-c`, 0, usageRecord(`${wallet}-c`, wallet));
    });

    test('the wallet is never left locked by a key refusal, and the balance refusal wins when both fail', async () => {
      const wallet = await fundedWallet(storage.db, 500);
      const key = await limitedKey(wallet, 100, 'total');
      const overKey = await tryReserve(storage, req(wallet, key, `${wallet}-k`, 200), Date.now());
      assert.ok(!overKey.ok && overKey.refused === 'key_limit');
      const overBoth = await tryReserve(storage, req(wallet, key, `${wallet}-b`, 600), Date.now());
      assert.ok(!overBoth.ok && overBoth.refused === 'balance');
      const w = await storage.db.selectFrom('wallets').select('locked_usdc').where('address', '=', wallet).executeTakeFirstOrThrow();
      assert.equal(Number(w.locked_usdc), 0);
    });
  });
}

describe('two gateway instances sharing PostgreSQL', () => {
  let fake: FakeOpenAI;
  let a: TestGateway;
  let b: TestGateway;
  before(async () => {
    fake = await startFakeOpenAI();
    const databaseUrl = await freshDatabaseUrl('postgres');
    const config = {
      providers: { fake: { baseUrl: fake.url }, other: { baseUrl: fake.url } },
      models: MODELS,
      rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 }, keys: { perMinute: 100_000 }, public: { perMinute: 100_000 } },
    };
    a = await startTestGateway({ engine: 'postgres', databaseUrl, config });
    b = await startTestGateway({ engine: 'postgres', databaseUrl, config });
  });
  afterEach(() => a.assertLedger());
  after(async () => {
    await Promise.allSettled([a?.stop(), b?.stop()]);
    await fake?.close();
  });

  test('a limit covering K requests admits exactly K of 200 spread over both instances', async () => {
    const plan = planChat(structuredClone(BODY), a.services.catalog, a.services.config);
    fake.behaviour = { usage: { prompt_tokens: plan.promptUpperBound, completion_tokens: BODY.max_tokens }, delayMs: 300 };
    const K = 9;
    const account = newAccount();
    await adjustBalance(a.services.storage.db, { wallet: account.address, amountUsdc: 1_000_000_000 });
    const created = await call(a.url, 'POST', '/v1/auth/keys', {
      ...(await createKeyProof(account)),
      spend_limit_usdc: K * plan.reservationUsdc + 1,
      spend_limit_period: 'month',
    });
    assert.equal(created.status, 201, created.text);
    const before = fake.received.length;
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => call((i % 2 ? b : a).url, 'POST', '/v1/chat/completions', BODY, { authorization: `Bearer ${created.body.key}` })),
    );
    assert.equal(results.filter((r) => r.status === 200).length, K, JSON.stringify(results.map((r) => r.status)));
    assert.ok(results.every((r) => r.status === 200 || r.body.error === 'KEY_LIMIT_EXCEEDED'));
    assert.equal(fake.received.length - before, K);
  });
});

async function waitFor(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 50));
  }
}
