import assert from 'node:assert/strict';
import { Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { redisLimiter, type RedisLimiter } from '../../src/ratelimit/redis.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { until } from '../support/until.ts';

const PREFIX = 'tollgate:rl:';

/** How many times Redis was sent a script's text (EVAL): after NOSCRIPT, the client resends the script itself. */
async function scriptLoads(admin: Redis): Promise<number> {
  return Number((await admin.info('commandstats')).match(/^cmdstat_eval:calls=(\d+)/m)?.[1] ?? 0);
}

/** Counts the writes to sockets connected to `port` while `work` runs (each a system call: the client never corks). */
async function socketWrites<T>(port: number, work: () => Promise<T>): Promise<{ writes: number; result: T }> {
  const write = Socket.prototype.write;
  let writes = 0;
  Socket.prototype.write = function (this: Socket, ...args: Parameters<Socket['write']>) {
    if (this.remotePort === port) writes++;
    return write.apply(this, args);
  } as Socket['write'];
  try {
    const result = await work();
    return { writes, result };
  } finally {
    Socket.prototype.write = write;
  }
}

/**
 * The limiter's hits issued in one event-loop turn go to Redis in one socket write (ioredis's
 * auto-pipelining), and a pipeline of hits must decide exactly as hits sent one by one: each counted
 * once, never more than the limit, also when Redis has lost the script (SCRIPT FLUSH, a restart)
 * and every hit of the pipeline first comes back NOSCRIPT.
 */
describe('the Redis limiter pipelines concurrent hits', () => {
  let server: RedisServer;
  let limiter: RedisLimiter;
  let admin: Redis;
  before(async () => {
    server = await startRedis();
    limiter = redisLimiter(server.url);
    admin = new Redis(server.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined); // refused while Redis restarts below; its commands wait for the reconnection
  });
  after(async () => {
    admin?.disconnect();
    await limiter?.close();
    await server?.stop();
  });

  const burst = (key: string, n: number, limit: number) => Promise.all(Array.from({ length: n }, () => limiter.hit(key, [{ limit, windowMs: 60_000 }])));
  /** Whether a hit is decided by Redis (not refused as an outage). */
  const answers = (key: string) =>
    limiter.hit(key, [{ limit: 100, windowMs: 60_000 }]).then(
      () => true,
      () => false,
    );
  const allowed = (decisions: { allowed: boolean }[]) => decisions.filter((d) => d.allowed).length;

  test('forty hits in one turn reach Redis in a few socket writes, not forty', async () => {
    await limiter.hit('warm', [{ limit: 10, windowMs: 60_000 }]);
    const { writes, result: decisions } = await socketWrites(Number(new URL(server.url).port), () => burst('burst', 40, 1_000));
    // Pipelined, one write (a few at most); one by one, forty.
    assert.equal(allowed(decisions), 40);
    assert.ok(writes <= 5, `the forty hits took ${writes} write calls`);
  });

  test('after SCRIPT FLUSH a pipeline of hits that all come back NOSCRIPT is decided, each hit counted once', async () => {
    await limiter.hit('flushed', [{ limit: 7, windowMs: 60_000 }]);
    await admin.script('FLUSH');
    const loadsBefore = await scriptLoads(admin);
    const decisions = await burst('flushed', 30, 7);
    assert.ok((await scriptLoads(admin)) > loadsBefore, 'the pipeline met NOSCRIPT and the script was sent again');
    assert.equal(allowed(decisions), 6, 'the limit of 7, one taken before the flush');
    assert.equal(await admin.zcard(`${PREFIX}flushed`), 7);
    assert.deepEqual(
      decisions.filter((d) => !d.allowed).map((d) => d.remaining),
      Array(24).fill(0),
    );
  });

  test('a restarted Redis (empty, no script loaded) serves the next pipeline of hits', async () => {
    await limiter.hit('restarted', [{ limit: 5, windowMs: 60_000 }]);
    await server.kill();
    await server.startAgain();
    // The client reconnects in the background; until it has, a hit is an outage, never a pass.
    await until(() => answers('reconnected'), 'the limiter reconnected', 15_000);
    const decisions = await burst('restarted', 12, 5);
    assert.equal(allowed(decisions), 5, 'a fresh Redis forgot the earlier hit: the full limit again, never more');
    assert.equal(await admin.zcard(`${PREFIX}restarted`), 5);
  });

  test('attack: a hit queued behind a pipeline Redis never answers still waits at most the 1 s command timeout', async () => {
    await limiter.hit('paused', [{ limit: 10, windowMs: 60_000 }]);
    // CLIENT PAUSE: Redis holds every client's commands unanswered, as a frozen server would.
    await admin.call('CLIENT', 'PAUSE', '2500', 'ALL');
    const first = limiter.hit('paused', [{ limit: 10, windowMs: 60_000 }]).catch((err: unknown) => err);
    await new Promise((r) => setTimeout(r, 300)); // the first hit's pipeline is in flight; the next waits behind it
    const started = Date.now();
    const queued = await limiter.hit('paused', [{ limit: 10, windowMs: 60_000 }]).catch((err: unknown) => err);
    const waitedMs = Date.now() - started;
    assert.equal((queued as Error).name, 'DependencyUnavailable');
    assert.equal(((await first) as Error).name, 'DependencyUnavailable');
    // Its own second, not the pipeline's before it on top (which would make about 1.7 s): a generous bound.
    assert.ok(waitedMs < 1_500, `the queued hit waited ${waitedMs} ms`);
    await until(() => answers('paused'), 'Redis answers again', 10_000);
  });
});
