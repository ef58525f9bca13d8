import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { RateLimiter } from '../../src/ratelimit/limiter.ts';
import { memoryLimiter } from '../../src/ratelimit/memory.ts';
import { redisLimiter } from '../../src/ratelimit/redis.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

const backends: [string, () => Promise<{ limiter: RateLimiter; stop(): Promise<void> }>][] = [
  ['memory', async () => ({ limiter: memoryLimiter(), stop: async () => undefined })],
  [
    'redis',
    async () => {
      const server: RedisServer = await startRedis();
      const limiter = redisLimiter(server.url);
      return { limiter, stop: async () => (await limiter.close(), await server.stop()) };
    },
  ],
];

for (const [name, make] of backends) {
  describe(`sliding-window limiter (${name})`, () => {
    let limiter: RateLimiter;
    let stop: () => Promise<void>;
    before(async () => ({ limiter, stop } = await make()));
    after(() => stop());

    const W = [{ limit: 3, windowMs: 1000 }];
    const T = 1_700_000_000_000;

    // Exact edges need a clock the test moves; the Redis backend runs on Redis's own clock (see
    // test/ratelimit/redis-clock-skew.test.ts), so its edges are checked in real time below.
    const exact = name === 'memory' ? test : test.skip;

    exact('allows the limit, refuses the next, and frees a slot exactly when the oldest hit leaves the window', async () => {
      const key = `edge-${name}`;
      const a = await limiter.hit(key, W, T);
      assert.deepEqual(a, { allowed: true, limit: 3, remaining: 2, resetAt: T + 1000, retryAfterMs: 0 });
      assert.equal((await limiter.hit(key, W, T + 100)).remaining, 1);
      assert.equal((await limiter.hit(key, W, T + 200)).remaining, 0);
      const refused = await limiter.hit(key, W, T + 300);
      assert.equal(refused.allowed, false);
      assert.equal(refused.retryAfterMs, 700);
      assert.equal(refused.resetAt, T + 1000);
      assert.equal((await limiter.hit(key, W, T + 999)).allowed, false, 'one millisecond before the edge');
      const atEdge = await limiter.hit(key, W, T + 1000);
      assert.equal(atEdge.allowed, true, 'the first hit leaves the window at exactly T + 1000');
      assert.equal(atEdge.remaining, 0);
      assert.equal((await limiter.hit(key, W, T + 1001)).allowed, false);
      assert.equal((await limiter.hit(key, W, T + 1100)).allowed, true, 'the second hit left at T + 1100');
    });

    exact('refused hits are not counted', async () => {
      const key = `refused-${name}`;
      for (let i = 0; i < 3; i++) assert.equal((await limiter.hit(key, W, T + i)).allowed, true);
      for (let i = 0; i < 50; i++) assert.equal((await limiter.hit(key, W, T + 10 + i)).allowed, false);
      assert.equal((await limiter.hit(key, W, T + 1000)).allowed, true, 'retrying did not extend the block');
    });

    exact('every window must allow; the tightest one is reported', async () => {
      const key = `two-${name}`;
      const windows = [
        { limit: 2, windowMs: 1000 },
        { limit: 3, windowMs: 10_000 },
      ];
      assert.equal((await limiter.hit(key, windows, T)).remaining, 1);
      assert.equal((await limiter.hit(key, windows, T + 1)).allowed, true);
      assert.equal((await limiter.hit(key, windows, T + 2)).allowed, false);
      const third = await limiter.hit(key, windows, T + 1000);
      assert.equal(third.allowed, true);
      assert.equal(third.remaining, 0, 'both windows are now full');
      const blocked = await limiter.hit(key, windows, T + 2500);
      assert.equal(blocked.allowed, false, 'the short window has room but the long one is full');
      assert.equal(blocked.retryAfterMs, 10_000 - 2500);
      assert.equal(blocked.limit, 3, 'the long window is the one that refuses');
    });

    exact('a long steady stream counts exactly the hits inside the window, however many have aged out', async () => {
      // One hit a millisecond for 5 s against a 1 s window: from 1 s on, 999 earlier hits are
      // always live, so every hit is allowed with 1,500 − 999 − 1 left. Thousands age out on the way.
      const window = [{ limit: 1500, windowMs: 1000 }];
      const wrong: string[] = [];
      for (let t = 0; t < 5000; t++) {
        const d = await limiter.hit('steady', window, T + t);
        const expected = 1500 - Math.min(t, 999) - 1;
        if (!d.allowed || d.remaining !== expected) wrong.push(`t=${t}: allowed=${d.allowed} remaining=${d.remaining}, expected ${expected}`);
      }
      assert.deepEqual(wrong.slice(0, 3), []);
    });

    test('keys are independent', async () => {
      for (let i = 0; i < 3; i++) await limiter.hit(`a-${name}`, W, T);
      assert.equal((await limiter.hit(`a-${name}`, W, T)).allowed, false);
      assert.equal((await limiter.hit(`b-${name}`, W, T)).allowed, true);
    });

    test('concurrent hits never exceed the limit', async () => {
      const key = `race-${name}`;
      const results = await Promise.all(Array.from({ length: 50 }, () => limiter.hit(key, [{ limit: 7, windowMs: 60_000 }], T)));
      assert.equal(results.filter((r) => r.allowed).length, 7);
    });
  });
}

describe('sliding-window limiter (redis) in real time', () => {
  let server: RedisServer;
  let limiter: RateLimiter;
  before(async () => {
    server = await startRedis();
    limiter = redisLimiter(server.url);
  });
  after(async () => {
    await limiter?.close();
    await server?.stop();
  });
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test('allows the limit, refuses the next with the wait until the oldest hit leaves, then allows again', async () => {
    const W = [{ limit: 3, windowMs: 1500 }];
    const first = await limiter.hit('edge', W);
    assert.equal(first.allowed, true);
    assert.equal(first.remaining, 2);
    assert.equal((await limiter.hit('edge', W)).remaining, 1);
    assert.equal((await limiter.hit('edge', W)).remaining, 0);
    const refused = await limiter.hit('edge', W);
    assert.equal(refused.allowed, false);
    assert.ok(refused.retryAfterMs > 0 && refused.retryAfterMs <= 1500, `retryAfterMs ${refused.retryAfterMs}`);
    assert.equal(refused.resetAt, first.resetAt, 'the slot frees when the first hit leaves');
    await sleep(refused.retryAfterMs + 20);
    assert.equal((await limiter.hit('edge', W)).allowed, true);
  });

  test('refused hits are not counted', async () => {
    const W = [{ limit: 3, windowMs: 2000 }];
    for (let i = 0; i < 3; i++) assert.equal((await limiter.hit('refused', W)).allowed, true);
    let last = await limiter.hit('refused', W);
    for (let i = 0; i < 20; i++) last = await limiter.hit('refused', W);
    assert.equal(last.allowed, false);
    await sleep(last.retryAfterMs + 20);
    assert.equal((await limiter.hit('refused', W)).allowed, true, 'retrying did not extend the block');
  });

  test('every window must allow; the one that refuses is reported', async () => {
    const windows = [
      { limit: 2, windowMs: 1000 },
      { limit: 3, windowMs: 60_000 },
    ];
    assert.equal((await limiter.hit('two', windows)).allowed, true);
    assert.equal((await limiter.hit('two', windows)).allowed, true);
    const short = await limiter.hit('two', windows);
    assert.equal(short.allowed, false);
    await sleep(short.retryAfterMs + 20);
    assert.equal((await limiter.hit('two', windows)).allowed, true);
    await sleep(1020); // every hit has left the short window
    const long = await limiter.hit('two', windows);
    assert.equal(long.allowed, false, 'the short window has room but the long one is full');
    assert.equal(long.limit, 3);
    assert.ok(long.retryAfterMs > 50_000);
  });
});
