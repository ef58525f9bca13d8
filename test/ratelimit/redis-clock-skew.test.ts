import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { redisLimiter } from '../../src/ratelimit/redis.ts';
import type { RateLimiter } from '../../src/ratelimit/limiter.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

/**
 * Attacker: a key holder whose requests a load balancer spreads over instances whose clocks
 * disagree. Hole: each instance stamped hits with its own clock, so one running ahead pruned the
 * others' hits as old, and one running behind stamped hits the others never counted: the shared
 * window let through more than its limit. Defence: the script takes the time from Redis (TIME).
 */
describe('Redis limiter: instances with skewed clocks share one correct window', () => {
  let redis: RedisServer;
  const instances: { name: string; limiter: RateLimiter; clock: () => number }[] = [];
  const HOUR = 3_600_000;
  before(async () => {
    redis = await startRedis();
    for (const [name, skew] of [
      ['on time', 0],
      ['an hour ahead', HOUR],
      ['an hour behind', -HOUR],
    ] as const) {
      instances.push({ name, limiter: redisLimiter(redis.url), clock: () => Date.now() + skew });
    }
  });
  after(async () => {
    for (const i of instances) await i.limiter.close();
    await redis?.stop();
  });

  test('hits spread over skewed instances never exceed the limit, and every refusal names a wait inside the window', async () => {
    const windows = [{ limit: 3, windowMs: 60_000 }];
    const decisions = [];
    for (let n = 0; n < 12; n++) {
      const i = instances[n % instances.length]!;
      decisions.push({ who: i.name, ...(await i.limiter.hit('wallet-a', windows, i.clock())) });
    }
    assert.equal(decisions.filter((d) => d.allowed).length, 3, JSON.stringify(decisions.map((d) => [d.who, d.allowed])));
    for (const d of decisions.filter((x) => !x.allowed)) {
      assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= 60_000, `${d.who} asked for a wait of ${d.retryAfterMs} ms`);
    }
  });

  test('a slot freed on Redis time is free on every instance, and none of them blocks the others beyond the window', async () => {
    const windows = [{ limit: 2, windowMs: 1_500 }];
    const [onTime, ahead, behind] = instances;
    assert.equal((await onTime!.limiter.hit('wallet-b', windows, onTime!.clock())).allowed, true);
    assert.equal((await onTime!.limiter.hit('wallet-b', windows, onTime!.clock())).allowed, true);
    const refusedAhead = await ahead!.limiter.hit('wallet-b', windows, ahead!.clock());
    assert.equal(refusedAhead.allowed, false, 'the instance whose clock runs ahead sees the window full');
    assert.equal((await behind!.limiter.hit('wallet-b', windows, behind!.clock())).allowed, false);
    await new Promise((r) => setTimeout(r, refusedAhead.retryAfterMs + 20));
    assert.equal((await ahead!.limiter.hit('wallet-b', windows, ahead!.clock())).allowed, true);
    assert.equal((await behind!.limiter.hit('wallet-b', windows, behind!.clock())).allowed, true);
    assert.equal((await onTime!.limiter.hit('wallet-b', windows, onTime!.clock())).allowed, false, 'the window holds the two new hits');
  });
});
