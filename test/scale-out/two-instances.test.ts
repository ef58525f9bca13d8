import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, afterEach, before, describe, test } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { MODELS } from '../support/chat-harness.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { newAccount, siweProof, createKeyProof } from '../support/siwe.ts';

/**
 * Scale-out as an operator runs it: two `tollgate serve` processes on one PostgreSQL and one Redis,
 * with the same config and key secret, and clients spread over both.
 */
const CHAT_PER_MINUTE = 20;

describe('two gateway processes sharing PostgreSQL and Redis', () => {
  let redis: RedisServer;
  let fake: FakeOpenAI;
  let storage: Storage;
  let a: GatewayProcess;
  let b: GatewayProcess;

  before(async () => {
    [redis, fake] = await Promise.all([startRedis(), startFakeOpenAI()]);
    const databaseUrl = await freshDatabaseUrl('postgres');
    const config = {
      database: { url: databaseUrl },
      providers: { fake: { baseUrl: fake.url }, other: { baseUrl: fake.url } },
      models: MODELS,
      rateLimits: { backend: 'redis', chat: { perMinute: CHAT_PER_MINUTE, perDay: 10_000 }, keys: { perMinute: 1000 }, public: { perMinute: 10_000 } },
    };
    const env = { TOLLGATE_REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') };
    const started = await Promise.allSettled([startGatewayProcess(config, env), startGatewayProcess(config, env)]);
    // Keep whichever started, so that `after` stops it even when the other did not.
    const [first, second] = started;
    if (first?.status === 'fulfilled') a = first.value;
    if (second?.status === 'fulfilled') b = second.value;
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    storage = openStorage(databaseUrl, { poolSize: 2 });
  });
  afterEach(async () => {
    const ledger = await checkLedger(storage.db);
    assert.ok(ledger.ok, ledger.problems.join('\n'));
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await storage?.close();
    await Promise.all([redis?.stop(), fake?.close()]);
  });

  async function walletWithKey(usdc: number) {
    const account = newAccount();
    if (usdc > 0) {
      await adjustBalance(storage.db, { wallet: account.address, amountUsdc: usdc, note: 'test funding' });
    }
    const created = await call(a.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
    assert.equal(created.status, 201, created.text);
    return { account, key: created.body.key as string, id: created.body.id as number };
  }
  const chat = (gw: GatewayProcess, key: string, body: Record<string, unknown> = {}) =>
    call(
      gw.url,
      'POST',
      '/v1/chat/completions',
      { model: 'chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100, ...body },
      { authorization: `Bearer ${key}` },
    );

  test('concurrent chats through both instances never spend more than the shared balance', async () => {
    fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 }, delayMs: 2_000 };
    // What one request reserves, as the gateway itself reports it to a wallet that cannot pay.
    const probe = await walletWithKey(0);
    const refused = await chat(a, probe.key);
    assert.equal(refused.status, 402);
    const reserve = refused.body.required_usdc as number;
    assert.ok(reserve > 0);

    const K = 5;
    const funded = K * reserve + Math.floor(reserve / 2);
    const w = await walletWithKey(funded);
    const received = fake.received.length;
    // 3K requests at once, alternating instances (so each decides half of them against the same
    // balance); the provider holds each one for 2 s, so every reservation is taken before any is
    // settled.
    const results = await Promise.all(Array.from({ length: 3 * K }, (_, i) => chat(i % 2 ? b : a, w.key)));
    const ok = results.filter((r) => r.status === 200);
    const poor = results.filter((r) => r.status === 402);
    assert.equal(ok.length, K, `exactly the ${K} requests the balance covers were served`);
    assert.equal(poor.length, 2 * K);
    for (const r of poor) assert.equal(r.body.error, 'INSUFFICIENT_BALANCE');
    assert.equal(fake.received.length - received, K, 'the provider was called only for paid requests');

    const perRequest = Math.ceil(10 * 1.2 + 10 * 2.4);
    const balance = await getBalance(storage.db, w.account.address);
    assert.equal(balance.locked_usdc, 0);
    assert.equal(balance.balance_usdc, funded - K * perRequest);
    fake.behaviour = {};
  });

  test('a key revoked on one instance fails on the other within 5 seconds', async () => {
    const w = await walletWithKey(1_000_000);
    assert.equal((await chat(b, w.key)).status, 200);
    const revoked = await call(a.url, 'DELETE', `/v1/auth/keys/${w.id}`, await siweProof(w.account));
    assert.equal(revoked.status, 200);
    const since = Date.now();
    let status = 200;
    while (Date.now() - since < 5_000) {
      status = (await chat(b, w.key)).status;
      if (status === 401) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status, 401, 'instance B still accepted the revoked key 5 s after A revoked it');
  });

  test('a SIWE proof used on one instance is refused on the other', async () => {
    const account = newAccount();
    const proof = await createKeyProof(account);
    assert.equal((await call(a.url, 'POST', '/v1/auth/keys', proof)).status, 201);
    const replay = await call(b.url, 'POST', '/v1/auth/keys', proof);
    assert.equal(replay.status, 401);
    assert.match(replay.body.message, /already used/);
    const listed = await call(b.url, 'GET', `/v1/auth/keys?message=${encodeURIComponent(proof.message)}&signature=${proof.signature}`);
    assert.equal(listed.status, 403, 'a key-creation proof cannot list keys either (it was signed for another action)');
  });

  test('the per-wallet rate limit holds across both instances', async () => {
    const w = await walletWithKey(1_000_000);
    const statuses: number[] = [];
    for (let i = 0; i < CHAT_PER_MINUTE + 4; i++) {
      const res = await chat(i % 2 ? b : a, w.key);
      statuses.push(res.status);
      if (res.status === 429) assert.ok(Number(res.headers.get('retry-after')) > 0);
    }
    assert.deepEqual(statuses, [...Array(CHAT_PER_MINUTE).fill(200), 429, 429, 429, 429]);
  });
});
