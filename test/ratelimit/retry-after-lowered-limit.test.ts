import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { redisLimiter } from '../../src/ratelimit/redis.ts';
import type { RateLimiter } from '../../src/ratelimit/limiter.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

/**
 * The shared window outlives any one configuration: Redis keeps a wallet's hits while the operator
 * lowers a limit and restarts the instances one by one (two instances on two limits meanwhile).
 * A window then holds more hits than its new limit, and a 429's Retry-After named the time the
 * oldest hit leaves, which frees no slot: the client that waited as told was refused again. The
 * wait named is the time enough hits have left for one to fit.
 */
describe('Redis limiter: Retry-After is truthful when a window holds more hits than its limit', () => {
  let redis: RedisServer;
  let limiter: RateLimiter;
  before(async () => {
    redis = await startRedis();
    limiter = redisLimiter(redis.url);
  });
  after(async () => {
    await limiter?.close();
    await redis?.stop();
  });

  test('a limit lowered from 5 to 2 under 5 counted hits: waiting the Retry-After it is told lets the retry in', async () => {
    const windowMs = 2_000;
    for (let i = 0; i < 5; i++) {
      assert.equal((await limiter.hit('wallet-lowered', [{ limit: 5, windowMs }])).allowed, true);
      await sleep(200);
    }
    const refused = await limiter.hit('wallet-lowered', [{ limit: 2, windowMs }]);
    assert.equal(refused.allowed, false);
    assert.ok(refused.retryAfterMs <= windowMs, `a wait within the window: ${refused.retryAfterMs} ms`);
    await sleep(refused.retryAfterMs + 30);
    const retried = await limiter.hit('wallet-lowered', [{ limit: 2, windowMs }]);
    assert.equal(retried.allowed, true, `refused again after waiting the ${refused.retryAfterMs} ms it was told (now told ${retried.retryAfterMs} ms)`);
  });
});
