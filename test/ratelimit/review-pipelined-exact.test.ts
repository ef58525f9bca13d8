import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import type { RateWindow } from '../../src/ratelimit/limiter.ts';
import { redisLimiter, type RedisLimiter } from '../../src/ratelimit/redis.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { outcomeOf, type Outcome } from './review-pipelined-support.ts';

const PREFIX = 'tollgate:rl:';
const MINUTE = (limit: number): RateWindow[] => [{ limit, windowMs: 60_000 }];

const count = (outcomes: Outcome[], which: Outcome) => outcomes.filter((o) => o === which).length;

/**
 * Two gateway instances (two limiter clients) on one Redis, each auto-pipelining: hits interleaved
 * in the same pipelines must be decided exactly as one by one. Every allowed hit counted once, no
 * hit over the limit, and a hit whose script fails never changes another hit's answer.
 */
describe('attack: pipelined hits from two instances on one Redis', () => {
  let server: RedisServer;
  let a: RedisLimiter;
  let b: RedisLimiter;
  let admin: Redis;
  before(async () => {
    server = await startRedis();
    a = redisLimiter(server.url);
    b = redisLimiter(server.url);
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    await Promise.all([a.hit('warm', MINUTE(10)), b.hit('warm', MINUTE(10))]);
  });
  after(async () => {
    admin?.disconnect();
    await a?.close();
    await b?.close();
    await server?.stop();
  });

  test('2,000 hits on one key from two instances at once, limit 37 a minute and 50 a day: exactly 37 allowed, 37 counted', async () => {
    const windows = [...MINUTE(37), { limit: 50, windowMs: 86_400_000 }];
    const outcomes = await Promise.all(Array.from({ length: 2_000 }, (_, i) => outcomeOf((i % 2 ? a : b).hit('one-key', windows))));
    assert.equal(count(outcomes, 'allowed'), 37);
    assert.equal(count(outcomes, 'denied'), 2_000 - 37);
    assert.equal(await admin.zcard(`${PREFIX}one-key`), 37);
  });

  test('many honest users at once: 300 keys, 6 hits each under a limit of 10, all allowed and each counted once', async () => {
    const keys = Array.from({ length: 300 }, (_, i) => `honest-${i}`);
    const outcomes = await Promise.all(keys.flatMap((key, k) => Array.from({ length: 6 }, (_, i) => outcomeOf(((k + i) % 2 ? a : b).hit(key, MINUTE(10))))));
    assert.equal(count(outcomes, 'allowed'), 1_800);
    const counted = await Promise.all(keys.map((key) => admin.zcard(`${PREFIX}${key}`)));
    assert.deepEqual(new Set(counted), new Set([6]));
  });

  test('a hit whose key Redis refuses (WRONGTYPE) inside a pipeline: an outage for that hit alone, the others decided exactly', async () => {
    await admin.set(`${PREFIX}not-a-set`, 'x');
    const pending: Promise<Outcome>[] = [];
    for (let i = 0; i < 60; i++) {
      pending.push(outcomeOf(a.hit('beside-wrongtype', MINUTE(20))));
      if (i % 10 === 0) pending.push(outcomeOf(a.hit('not-a-set', MINUTE(20))));
    }
    const outcomes = await Promise.all(pending);
    const refused = outcomes.filter((_, i) => i % 11 === 1);
    const others = outcomes.filter((_, i) => i % 11 !== 1);
    assert.deepEqual(new Set(refused), new Set(['outage']), 'never let through: decided by the local share or a 503');
    assert.equal(count(others, 'allowed'), 20);
    assert.equal(count(others, 'denied'), 40);
    assert.equal(await admin.zcard(`${PREFIX}beside-wrongtype`), 20);
  });

  test('a hit whose script fails (a bug: a limit that is not a number) inside a pipeline: a 500 for that hit alone, the others exact', async () => {
    const broken = [{ limit: 'not a number' as unknown as number, windowMs: 60_000 }];
    const pending: Promise<Outcome>[] = [];
    for (let i = 0; i < 30; i++) {
      pending.push(outcomeOf(b.hit('beside-bug', MINUTE(12))));
      if (i % 10 === 5) pending.push(outcomeOf(b.hit('beside-bug', broken)));
    }
    const outcomes = await Promise.all(pending);
    assert.equal(count(outcomes, 'bug'), 3, 'the script bug stays a 500, never an outage that a local share would serve');
    assert.equal(count(outcomes, 'allowed'), 12);
    assert.equal(count(outcomes, 'denied'), 18);
    assert.equal(await admin.zcard(`${PREFIX}beside-bug`), 12);
  });

  test("/health's probe inside a busy pipeline: answered, and it takes no slot of any caller's key", async () => {
    const busy = Array.from({ length: 500 }, (_, i) => outcomeOf(a.hit(`busy-${i % 5}`, MINUTE(40))));
    const probes = Array.from({ length: 20 }, () =>
      a.probe().then(
        () => 'healthy',
        (err: Error) => err.name,
      ),
    );
    assert.deepEqual(new Set(await Promise.all(probes)), new Set(['healthy']));
    const outcomes = await Promise.all(busy);
    assert.equal(count(outcomes, 'allowed'), 200);
    const counted = await Promise.all([0, 1, 2, 3, 4].map((i) => admin.zcard(`${PREFIX}busy-${i}`)));
    assert.deepEqual(counted, [40, 40, 40, 40, 40]);
  });
});
