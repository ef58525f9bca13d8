import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from '../support/gateway.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { assertOutageAnswer, chatBody, waitForHealth } from './support.ts';

/**
 * Redis holds the shared rate limits. With `rateLimits.redisOutage: closed` (the operator's opt-in;
 * the default serves on, see redis-outage-local.test.ts), every rate-limited route fails closed
 * with 503 while it does not answer (never 500, never served without a limit), /health turns 503
 * naming redis, and both recover by themselves when Redis is back.
 */
describe('Redis outage with redisOutage: closed: the shared rate limiter fails closed with 503 and recovers', () => {
  let redis: RedisServer;
  let h: ChatHarness;
  before(async () => {
    redis = await startRedis();
    h = await startChatHarness(
      'sqlite',
      { rateLimits: { backend: 'redis', redisOutage: 'closed', chat: { perMinute: 1000 }, keys: { perMinute: 1000 }, public: { perMinute: 1000 } } },
      { env: { TOLLGATE_REDIS_URL: redis.url } },
    );
  });
  after(async () => {
    await h?.stop();
    await redis?.stop();
  });

  test('Redis stopped: chat, models, keys and usage answer 503 with Retry-After; /health is 503 naming redis; Redis back: all recover', async () => {
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 10 } };
    const w = await h.wallet(1_000_000);
    const auth = { authorization: `Bearer ${w.key}` };
    const healthy = await waitForHealth(h.gw.url, 'ok');
    assert.deepEqual(healthy.body.checks, { database: 'ok', redis: 'ok' });
    assert.equal((await call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth)).status, 200);
    const balanceBefore = await h.balance(w.account);
    const served = h.fake.received.length;

    await redis.kill();
    const routes = {
      chat: () => call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, auth),
      'streamed chat': () => call(h.gw.url, 'POST', '/v1/chat/completions', { ...chatBody, stream: true }, auth),
      models: () => call(h.gw.url, 'GET', '/v1/models'),
      usage: () => call(h.gw.url, 'GET', `/v1/usage/${w.account.address}`, undefined, auth),
      'key creation': async () => call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(w.account)),
      'key list': async () => call(h.gw.url, 'GET', `/v1/auth/keys?${proofQuery(await siweProof(w.account))}`),
    };
    for (const [what, send] of Object.entries(routes)) assertOutageAnswer(await send(), 'redis', what);
    const degraded = await waitForHealth(h.gw.url, 'degraded');
    assert.equal(degraded.status, 503);
    assert.equal(degraded.body.checks.redis, 'down');
    assert.equal(degraded.body.checks.database, 'ok');
    assert.equal(h.fake.received.length, served, 'nothing reached the provider without a rate-limit decision');
    assert.deepEqual(await h.balance(w.account), balanceBefore, 'nothing was reserved or charged');
    assert.doesNotMatch(h.gw.logs(), /"statusCode":500|unhandled error/);

    await redis.startAgain();
    await waitForHealth(h.gw.url, 'ok');
    assert.equal((await routes.chat()).status, 200);
    assert.equal((await routes.models()).status, 200);
    assert.equal((await routes['key creation']()).status, 201);
    await h.gw.assertLedger();
  });
});
