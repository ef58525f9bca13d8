import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { freePort } from '../../src/devchain/ports.ts';
import { redisLimiter, type RedisLimiter } from '../../src/ratelimit/redis.ts';
import { withLocalFallback } from '../../src/ratelimit/local-fallback.ts';
import { stopChild } from '../support/children.ts';
import { tcpRelay } from '../support/tcp-relay.ts';
import { until } from '../support/until.ts';
import { launchRedis } from './review-pipelined-support.ts';

const PREFIX = 'tollgate:rl:';
const WINDOW = (limit: number) => [{ limit, windowMs: 60_000 }];

/** The timers alive in this process: every hit's deadline and command timer must be gone once it is decided. */
const activeTimers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

interface Outcome {
  outcome: 'allowed' | 'denied' | 'outage' | 'other';
  tookMs: number;
}

/** One hit, timed from the call, with what came of it. */
async function timedHit(limiter: Pick<RedisLimiter, 'hit'>, key: string, limit: number): Promise<Outcome> {
  const started = Date.now();
  const outcome = await limiter.hit(key, WINDOW(limit)).then<Outcome['outcome'], Outcome['outcome']>(
    (d) => (d.allowed ? 'allowed' : 'denied'),
    (err: Error) => (err.name === 'DependencyUnavailable' ? 'outage' : 'other'),
  );
  return { outcome, tookMs: Date.now() - started };
}

/**
 * Redis frozen or killed while auto-pipelined hits are in flight and queued behind them, the limiter
 * used bare (rateLimits.redisOutage: closed, where an outage is a 503): every hit is decided within
 * the 1 s deadline as an outage, none allowed; no timer or queued command outlives the freeze.
 */
describe('attack: a frozen or killed Redis under a pipeline of thousands of hits', () => {
  let port: number;
  let child: ChildProcess;
  let limiter: RedisLimiter;
  let admin: Redis;
  const url = () => `redis://127.0.0.1:${port}`;
  before(async () => {
    port = await freePort();
    child = await launchRedis(port);
    limiter = redisLimiter(`redis://127.0.0.1:${port}`);
    admin = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
  });
  after(async () => {
    admin?.disconnect();
    await limiter?.close();
    child?.kill('SIGCONT');
    if (child) await stopChild(child, 'SIGKILL');
  });

  test('three thousand hits to a frozen Redis, in waves behind the pipeline in flight: each an outage within the deadline, none allowed', async () => {
    await limiter.hit('frozen', WINDOW(5));
    const timersBefore = activeTimers();
    const scriptRunsBefore = await scriptRuns(admin);
    child.kill('SIGSTOP');
    // The first wave is written at once; the later ones queue behind it (one pipeline in flight at a time).
    const waves: Promise<Outcome[]>[] = [];
    for (const delayMs of [0, 50, 550]) {
      await new Promise((r) => setTimeout(r, delayMs));
      waves.push(Promise.all(Array.from({ length: 1_000 }, () => timedHit(limiter, 'frozen', 5))));
    }
    const outcomes = (await Promise.all(waves)).flat();
    const slowest = Math.max(...outcomes.map((o) => o.tookMs));
    assert.deepEqual(new Set(outcomes.map((o) => o.outcome)), new Set(['outage']));
    // A generous bound on "at most the 1 s command timeout": behind the first wave's second, the second wave would wait 1.95 s.
    assert.ok(slowest < 1_600, `a hit waited ${slowest} ms`);

    child.kill('SIGCONT');
    await until(() => answers(limiter, 'thawed'), 'Redis answers again', 15_000);
    // Nothing stays queued in the client: every hit reached Redis, and every deadline and command timer is gone.
    await until(async () => (await scriptRuns(admin)) >= scriptRunsBefore + 3_000, 'every queued hit reached Redis', 10_000);
    await until(() => activeTimers() <= timersBefore, `timers back to ${timersBefore}`, 5_000);
    // Residual (docs/DECISIONS.md): Redis ran the refused hits when it thawed, so they may fill the window, never past its limit.
    assert.ok((await admin.zcard(`${PREFIX}frozen`)) <= 5);
  });

  test('with the local fallback (two instances), a frozen Redis: every hit decided locally within the deadline, together at most the limit', async () => {
    const events = { onChange: () => undefined, onLocalDecision: () => undefined };
    const instances = [withLocalFallback(redisLimiter(url()), 2, events), withLocalFallback(redisLimiter(url()), 2, events)];
    try {
      await Promise.all(instances.map((l) => l.hit('warm', WINDOW(10))));
      child.kill('SIGSTOP');
      const waves: Promise<Outcome[]>[] = [];
      for (const delayMs of [0, 50]) {
        await new Promise((r) => setTimeout(r, delayMs));
        waves.push(Promise.all(instances.flatMap((l) => Array.from({ length: 500 }, () => timedHit(l, 'local', 10)))));
      }
      const outcomes = (await Promise.all(waves)).flat();
      assert.ok(Math.max(...outcomes.map((o) => o.tookMs)) < 1_600);
      assert.equal(outcomes.filter((o) => o.outcome === 'allowed').length, 10, 'each instance its share of 5');
      assert.deepEqual(new Set(outcomes.map((o) => o.outcome)), new Set(['allowed', 'denied']));
      assert.ok(instances.every((l) => l.degraded()));
      child.kill('SIGCONT');
      await until(() => instances.every((l) => !l.degraded()), 'both back on the shared limiter', 15_000);
    } finally {
      child.kill('SIGCONT');
      await Promise.all(instances.map((l) => l.close()));
    }
  });

  test('Redis killed with a pipeline in flight, restarted once its hits were refused: they are not replayed onto it', async () => {
    await limiter.hit('killed', WINDOW(100));
    child.kill('SIGSTOP');
    const inFlight = Promise.all(Array.from({ length: 50 }, () => timedHit(limiter, 'killed', 100)));
    await new Promise((r) => setTimeout(r, 300));
    await stopChild(child, 'SIGKILL');
    const outcomes = await inFlight;
    assert.deepEqual(new Set(outcomes.map((o) => o.outcome)), new Set(['outage']));
    child = await launchRedis(port);
    await until(() => answers(limiter, 'back'), 'the limiter reconnected', 15_000);
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(await admin.zcard(`${PREFIX}killed`), 0, 'hits refused before the restart would count against the fresh window');
  });

  test('the connection cut with a pipeline in flight, Redis alive: no hit is run twice', async () => {
    const relay = await tcpRelay(port);
    await relay.open();
    const viaRelay = redisLimiter(`redis://127.0.0.1:${relay.port}`);
    try {
      await viaRelay.hit('cut', WINDOW(100));
      child.kill('SIGSTOP');
      const inFlight = Promise.all(Array.from({ length: 50 }, () => timedHit(viaRelay, 'cut', 100)));
      await new Promise((r) => setTimeout(r, 300));
      await relay.close(); // Redis still reads what was sent before the cut when it thaws
      await relay.open();
      child.kill('SIGCONT');
      const outcomes = await inFlight;
      await until(() => answers(viaRelay, 'reconnected'), 'the limiter reconnected', 15_000);
      await new Promise((r) => setTimeout(r, 200));
      const counted = await admin.zcard(`${PREFIX}cut`);
      // Each hit counted at most once (a honest client's window is not filled twice as fast), and none allowed uncounted.
      assert.ok(counted <= 51, `${counted} hits counted for 51 sent`);
      assert.ok(outcomes.filter((o) => o.outcome === 'allowed').length + 1 <= counted);
    } finally {
      child.kill('SIGCONT');
      await viaRelay.close();
      await relay.close();
    }
  });
});

/** How many times Redis ran a script (EVALSHA or EVAL) since it started. */
async function scriptRuns(admin: Redis): Promise<number> {
  const stats = await admin.info('commandstats');
  return ['evalsha', 'eval'].reduce((sum, name) => sum + Number(stats.match(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm'))?.[1] ?? 0), 0);
}

/** Whether a hit is decided by Redis (not refused as an outage). */
function answers(limiter: { hit: RedisLimiter['hit'] }, key: string): Promise<boolean> {
  return limiter.hit(key, WINDOW(1_000)).then(
    () => true,
    () => false,
  );
}
