import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { memoryLimiter } from '../../src/ratelimit/memory.ts';
import { withLocalFallback } from '../../src/ratelimit/local-fallback.ts';
import { redisLimiter } from '../../src/ratelimit/redis.ts';
import { startRedis } from '../support/redis.ts';

setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;
const heapAfterGc = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

const CLIENTS = 300_000;
const MINUTE = [{ limit: 10, windowMs: 60_000 }];

/**
 * While Redis is down every instance keeps its own per-key hit logs (local-fallback.ts over
 * memory.ts). The keys include `ip:<client /64>` and `authfail:<client /64>`, counted before any
 * authentication, so an IPv6 client can name a new key with every request. A key whose hits have
 * all left every window must be dropped, or a long outage grows the heap with every address seen.
 */
describe('attack: distinct client addresses during a Redis outage grow the local limiter', () => {
  test('keys whose one-minute windows have passed are dropped once the limiter prunes', async () => {
    const redis = await startRedis({ down: true });
    const limiter = withLocalFallback(redisLimiter(redis.url), 1, { onChange: () => undefined, onLocalDecision: () => undefined });
    try {
      const t0 = Date.now();
      await limiter.hit('ip:warm-up', MINUTE, t0);
      assert.ok(limiter.degraded(), 'Redis is down: decisions are local');
      const baseline = heapAfterGc();
      for (let i = 0; i < CLIENTS; i++) await limiter.hit(`ip:2001:db8:${(i >>> 16).toString(16)}:${(i & 0xffff).toString(16)}::/64`, MINUTE, t0);
      const grown = heapAfterGc() - baseline;
      assert.ok(grown > 10_000_000, `the keys take memory: ${grown} bytes`);
      // Ten minutes later every one of those windows has passed; enough hits to run the prune.
      for (let i = 0; i < 20_000; i++) await limiter.hit('ip:2001:db8:ffff:ffff::/64', [{ limit: 1_000_000, windowMs: 60_000 }], t0 + 600_000);
      const kept = heapAfterGc() - baseline;
      assert.ok(kept < grown / 4, `${CLIENTS} keys idle for ten minutes still hold ${kept} of ${grown} bytes`);
    } finally {
      await limiter.close();
      await redis.stop();
    }
  });

  test('past its cap the limiter forgets the least recently hit key, which then starts a fresh count', async () => {
    const limiter = memoryLimiter(3);
    const t0 = Date.now();
    const one = [{ limit: 1, windowMs: 60_000 }];
    assert.ok((await limiter.hit('wallet:a', one, t0)).allowed);
    assert.ok((await limiter.hit('wallet:b', one, t0)).allowed);
    assert.ok((await limiter.hit('wallet:c', one, t0)).allowed);
    assert.equal((await limiter.hit('wallet:a', one, t0 + 1)).allowed, false, 'a recent refusal keeps a at the end');
    assert.ok((await limiter.hit('ip:d', one, t0 + 2)).allowed, 'a fourth key evicts b, the least recently hit');
    assert.equal((await limiter.hit('wallet:a', one, t0 + 3)).allowed, false, 'a was hit recently: still counted');
    assert.ok((await limiter.hit('wallet:b', one, t0 + 4)).allowed, 'b was forgotten: a fresh count');
  });
});
