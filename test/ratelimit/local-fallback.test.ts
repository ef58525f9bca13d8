import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DependencyUnavailable } from '../../src/outage.ts';
import { shareOf, withLocalFallback } from '../../src/ratelimit/local-fallback.ts';
import type { RedisLimiter } from '../../src/ratelimit/redis.ts';

/**
 * The fallback's own rules, around a stand-in for the Redis limiter (its real outages, against a
 * real redis-server, are test/outages/redis-outage-local.test.ts): which failures fall back, how
 * often a transition is reported, and each instance's share.
 */
function standIn(): RedisLimiter & { fail: unknown } {
  const s = {
    fail: null as unknown,
    async hit() {
      if (s.fail) throw s.fail;
      return { allowed: true, limit: 100, remaining: 99, resetAt: 0, retryAfterMs: 0 };
    },
    async probe() {
      if (s.fail) throw s.fail;
    },
    async close() {},
  };
  return s;
}

describe('the local fallback of the Redis limiter', () => {
  const W = [{ limit: 4, windowMs: 60_000 }];

  test('a Redis outage falls back; a bug in the limiter (not an outage) is thrown as it is, without a transition', async () => {
    const shared = standIn();
    const changes: boolean[] = [];
    const limiter = withLocalFallback(shared, 2, { onChange: (d) => changes.push(d), onLocalDecision: () => undefined });
    shared.fail = new Error('ERR Error running script: a bug');
    await assert.rejects(limiter.hit('k', W, 0), /a bug/);
    assert.deepEqual(changes, []);
    assert.equal(limiter.degraded(), false);
    shared.fail = new DependencyUnavailable('redis');
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push((await limiter.hit('k', W, i)).allowed);
    assert.deepEqual(decisions, [true, true, false, false, false], 'the share of 4 over 2 instances is 2');
    assert.deepEqual(changes, [true], 'one transition for five decisions');
    await assert.rejects(limiter.probe());
    shared.fail = null;
    await limiter.probe();
    assert.equal(limiter.degraded(), false);
    assert.equal((await limiter.hit('k', W, 10)).limit, 100, 'the shared limiter decides again');
    assert.deepEqual(changes, [true, false]);
    await limiter.close();
  });

  test("an instance's share is the limit over the instance count, rounded down, never below 1", () => {
    const share = (limit: number, instances: number) => shareOf([{ limit, windowMs: 1 }], instances)[0]!.limit;
    assert.deepEqual([share(60, 1), share(60, 2), share(7, 2), share(1, 4), share(10_000, 3)], [60, 30, 3, 1, 3333]);
  });
});
