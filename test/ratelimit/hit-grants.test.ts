import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { GRANT_MS, HitGrants, MAX_GRANT } from '../../src/ratelimit/hit-grants.ts';
import { redisLimiter, type RedisLimiter } from '../../src/ratelimit/redis.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const decision = { allowed: true, limit: 1000, remaining: 900, resetAt: 0, retryAfterMs: 0 };
const W = [{ limit: 1000, windowMs: 60_000 }];

describe('hits granted ahead, the book each instance keeps', () => {
  test('a grant doubles while each is spent before it runs out, and shrinks to what was spent when one runs out', () => {
    let now = 0;
    const grants = new HitGrants(() => now);
    const spend = (asked: number, granted: number) => {
      grants.keep('k', W, { decision, granted, asked, askedAt: now, base: `b${now}` });
      for (let i = 1; i < granted; i++) assert.ok(grants.take('k', W));
      assert.equal(grants.take('k', W), undefined, 'a grant gives no more hits than granted');
    };
    assert.equal(grants.want('k'), 1);
    spend(1, 1);
    assert.equal(grants.want('k'), 2);
    spend(2, 2);
    assert.equal(grants.want('k'), 4);
    for (let size = 4; size < MAX_GRANT; size *= 2) spend(size, size);
    assert.equal(grants.want('k'), MAX_GRANT, 'never above the cap');
    grants.keep('k', W, { decision, granted: 8, asked: 8, askedAt: now, base: 'late' });
    assert.ok(grants.take('k', W));
    now += GRANT_MS;
    assert.equal(grants.take('k', W), undefined, 'no hit is spent once the grant ran out');
    assert.deepEqual(grants.sweep(), [{ key: 'k', members: ['late-2', 'late-3', 'late-4', 'late-5', 'late-6', 'late-7'] }]);
    assert.equal(grants.want('k'), 2, 'two of the eight were spent');
  });

  test('a hit from a grant reports one fewer left each time, and a grant serves only the windows it was asked for', () => {
    const grants = new HitGrants(() => 0);
    grants.keep('k', W, { decision, granted: 3, asked: 4, askedAt: 0, base: 'b' });
    assert.equal(grants.take('k', W)?.remaining, 899);
    assert.equal(grants.take('k', [{ limit: 5, windowMs: 1000 }]), undefined);
    assert.equal(grants.take('k', W)?.remaining, 898);
  });
});

describe('the Redis limiter with hits granted ahead', () => {
  let server: RedisServer;
  let redis: Redis;
  const limiters: RedisLimiter[] = [];
  const limiter = (instances = 2) => {
    const l = redisLimiter(server.url, { instances });
    limiters.push(l);
    return l;
  };
  const scriptCalls = async () => {
    const stats = await redis.info('commandstats');
    return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
  };
  before(async () => {
    server = await startRedis();
    redis = new Redis(server.url);
  });
  after(async () => {
    for (const l of limiters) await l.close();
    redis.disconnect();
    await server.stop();
  });

  test('a busy key costs a Redis round trip per grant, not one per hit', async () => {
    const l = limiter(1);
    const before = await scriptCalls();
    for (let i = 0; i < 200; i++) assert.equal((await l.hit('busy', W)).allowed, true);
    const calls = (await scriptCalls()) - before;
    assert.ok(calls <= 12, `200 hits took ${calls} script runs`);
    // Every hit spent is counted in the shared window, and at most one grant's rest ahead of it.
    const counted = await redis.zcard('tollgate:rl:busy');
    assert.ok(counted >= 200 && counted < 200 + MAX_GRANT, `counted ${counted}`);
  });

  test('two instances together never let more than the limit through, and let the whole limit through', async () => {
    const [a, b] = [limiter(), limiter()];
    const windows = [{ limit: 200, windowMs: 60_000 }];
    let allowed = 0;
    for (let i = 0; i < 600; i++) if ((await (i % 2 ? b : a).hit('shared', windows)).allowed) allowed++;
    assert.equal(allowed, 200);
    assert.equal(await redis.zcard('tollgate:rl:shared'), 200);
  });

  test('near its limit a key is decided hit by hit: nothing is counted ahead', async () => {
    const [a, b] = [limiter(), limiter()];
    const windows = [{ limit: 8, windowMs: 60_000 }];
    const decisions: boolean[] = [];
    for (let i = 0; i < 12; i++) {
      decisions.push((await (i % 2 ? b : a).hit('tight', windows)).allowed);
      assert.equal(await redis.zcard('tollgate:rl:tight'), Math.min(8, i + 1), 'each allowed hit counted once, none ahead');
    }
    assert.deepEqual(decisions, [...Array(8).fill(true), ...Array(4).fill(false)]);
  });

  test('hits granted and not spent in time are given back to the shared window', async () => {
    const l = limiter(1);
    for (let i = 0; i < 30; i++) await l.hit('given-back', W);
    // Grants of 1, 2, 4, 8 and 16 hits: 31 counted for 30 made.
    assert.equal(await redis.zcard('tollgate:rl:given-back'), 31);
    const deadline = Date.now() + 4 * GRANT_MS;
    while ((await redis.zcard('tollgate:rl:given-back')) !== 30 && Date.now() < deadline) await sleep(100);
    assert.equal(await redis.zcard('tollgate:rl:given-back'), 30);
  });
});
