import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { redisLimiter, type RedisLimiter } from '../../src/ratelimit/redis.ts';
import type { ChildProcess } from 'node:child_process';
import { freePort } from '../../src/devchain/ports.ts';
import { stopChild } from '../support/children.ts';
import { until } from '../support/until.ts';
import { launchRedis, outcomeOf, type Outcome } from './review-pipelined-support.ts';

const PREFIX = 'tollgate:rl:';
const LIMIT = 10_000;

/**
 * Redis starts refusing writes (MISCONF: its last snapshot failed) while pipelines of hits are in
 * flight: each hit is either decided by Redis and counted, or an outage (the local share or a 503);
 * never a 500, and never a hit let through that Redis did not count.
 */
describe('attack: Redis turns to MISCONF in the middle of pipelined hits', () => {
  let child: ChildProcess;
  let limiter: RedisLimiter;
  let admin: Redis;
  let dir: string;
  before(async () => {
    const port = await freePort();
    dir = mkdtempSync(join(tmpdir(), 'tollgate-misconf-'));
    child = await launchRedis(port, ['--dir', dir, '--dbfilename', 'dump.rdb', '--stop-writes-on-bgsave-error', 'no']);
    // The snapshot's name is a non-empty directory (made once Redis has started: it would load it), so every BGSAVE fails at its rename.
    mkdirSync(join(dir, 'dump.rdb'));
    writeFileSync(join(dir, 'dump.rdb', 'x'), 'x');
    limiter = redisLimiter(`redis://127.0.0.1:${port}`);
    admin = new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 1 });
    await admin.config('SET', 'save', '3600 1');
    await admin.bgsave();
    await until(async () => /rdb_last_bgsave_status:err/.test(await admin.info('persistence')), 'the BGSAVE failed', 20_000);
  });
  after(async () => {
    admin?.disconnect();
    await limiter?.close();
    if (child) await stopChild(child, 'SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('waves of hits while Redis starts refusing writes: each counted or an outage, the probe sees it', async () => {
    await limiter.hit('misconf', [{ limit: LIMIT, windowMs: 60_000 }]);
    const pending: Promise<Outcome>[] = [];
    let refusing: Promise<unknown> = Promise.resolve();
    for (let wave = 0; wave < 10; wave++) {
      for (let i = 0; i < 100; i++) pending.push(outcomeOf(limiter.hit('misconf', [{ limit: LIMIT, windowMs: 60_000 }])));
      // Sent on its own connection, racing the pipelines in flight.
      if (wave === 4) refusing = admin.config('SET', 'stop-writes-on-bgsave-error', 'yes');
      await new Promise((r) => setImmediate(r));
    }
    await refusing;
    const outcomes = await Promise.all(pending);
    const allowed = outcomes.filter((o) => o === 'allowed').length;
    assert.deepEqual(new Set(outcomes.filter((o) => o !== 'allowed')), new Set(['outage']), 'MISCONF is an outage, never a 500');
    await assert.rejects(limiter.probe(), { name: 'DependencyUnavailable' });

    await admin.config('SET', 'stop-writes-on-bgsave-error', 'no');
    assert.equal(await admin.zcard(`${PREFIX}misconf`), allowed + 1, 'every allowed hit counted, and only those');
    assert.ok(allowed > 0 && allowed < 1_000, `${allowed} allowed: Redis was to start refusing in the middle of the waves`);
  });
});
