import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { startFakeOpenAI, type FakeOpenAI } from '../../src/fake-providers/fake-openai.ts';
import { adjustBalance } from '../../src/ledger/movements.ts';
import { checkLedger } from '../../src/ledger/invariants.ts';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { MODELS } from '../support/chat-harness.ts';
import { freshDatabaseUrl } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { createKeyProof, newAccount } from '../support/siwe.ts';
import { answersWithin, assertOutageAnswer, chatBody, waitForHealth } from './support.ts';

/** How soon after Redis answers again the instance must serve (its reconnect backoff is at most 2 s). */
const RECOVERY_BOUND_MS = 10_000;

/**
 * An instance started while Redis is down must not answer 503 "database" to every chat for its
 * whole life. Run as a process, as an operator runs it, so its log shows any unhandled rejection.
 */
describe('a gateway started while Redis is down', () => {
  let redis: RedisServer;
  let fake: FakeOpenAI;
  let storage: Storage;
  let gw: GatewayProcess;
  before(async () => {
    [redis, fake] = await Promise.all([startRedis({ down: true }), startFakeOpenAI()]);
    const databaseUrl = await freshDatabaseUrl('sqlite');
    gw = await startGatewayProcess(
      {
        database: { url: databaseUrl },
        providers: { fake: { baseUrl: fake.url }, other: { baseUrl: fake.url } },
        models: MODELS,
        rateLimits: { backend: 'redis', redisOutage: 'closed', chat: { perMinute: 1000 }, keys: { perMinute: 1000 }, public: { perMinute: 1000 } },
      },
      { TOLLGATE_REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') },
    );
    storage = openStorage(databaseUrl);
  });
  after(async () => {
    await gw?.stop();
    await storage?.close();
    await Promise.all([redis?.stop(), fake?.close()]);
  });

  test('answers 503 naming Redis (not the database) while it is down, and serves chats within 10 s of its start', async () => {
    const account = newAccount();
    await adjustBalance(storage.db, { wallet: account.address, amountUsdc: 1_000_000, note: 'test funding' });

    const keyWhileDown = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
    assertOutageAnswer(keyWhileDown, 'redis', 'key creation while Redis is down');
    assert.match(keyWhileDown.body.message, /rate-limit store \(Redis\)/);
    assertOutageAnswer(await call(gw.url, 'GET', '/v1/models'), 'redis', 'models while Redis is down');
    const degraded = await waitForHealth(gw.url, 'degraded');
    assert.deepEqual(degraded.body.checks, { database: 'ok', redis: 'down' });

    await redis.startAgain();
    const { res: created } = await answersWithin(async () => call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account)), 201, RECOVERY_BOUND_MS);
    const auth = { authorization: `Bearer ${created.body.key}` };
    const chat = await call(gw.url, 'POST', '/v1/chat/completions', chatBody, auth);
    assert.equal(chat.status, 200, chat.text);
    assert.deepEqual((await waitForHealth(gw.url, 'ok', RECOVERY_BOUND_MS)).body.checks, { database: 'ok', redis: 'ok' });

    const log = gw.output();
    assert.doesNotMatch(log, /unhandled/i, 'no unhandled rejection and no unhandled error');
    assert.doesNotMatch(log, /"dependency":"database"/, 'Redis refusing was never reported as the database');
    const ledger = await checkLedger(storage.db);
    assert.ok(ledger.ok, ledger.problems.join('\n'));
  });
});
