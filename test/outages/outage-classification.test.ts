import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Sqlite from 'better-sqlite3';
import { unavailableDependency } from '../../src/http/errors.ts';
import { HttpRequestError } from 'viem';
import { DependencyUnavailable } from '../../src/outage.ts';
import { redisLimiter, type RedisLimiter } from '../../src/ratelimit/redis.ts';
import { isDatabaseOutage } from '../../src/storage/database-outage.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';
import { tempDir } from '../support/sqlite-engine.ts';

/** A refused socket: the same code whichever server refused it. */
const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED', syscall: 'connect' });

describe('a 503 names the dependency that is really down', () => {
  test('a refused socket tagged by the Redis client is Redis, never the database', () => {
    const err = new DependencyUnavailable('redis', { cause: refused() });
    assert.equal(unavailableDependency(err), 'redis');
    assert.equal(isDatabaseOutage(err), false);
  });

  test('an RPC transport error is the chain RPC, never the database, though its cause is ECONNREFUSED', () => {
    const err = new HttpRequestError({ url: 'http://127.0.0.1:8545', cause: new TypeError('fetch failed', { cause: refused() }) as Error });
    assert.equal(unavailableDependency(err), 'rpc');
  });

  test('an untagged refused socket (what pg raises) is still the database', () => {
    assert.equal(unavailableDependency(refused()), 'database');
    assert.equal(isDatabaseOutage(refused()), true);
  });

  test("SQLite's BUSY_SNAPSHOT (a read-first transaction that finds the file written since) is an outage, not a failure", () => {
    const file = join(tempDir(), 'snapshot.db');
    const first = new Sqlite(file);
    first.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1)');
    const second = new Sqlite(file);
    first.exec('BEGIN');
    first.prepare('SELECT count(*) FROM t').get();
    second.exec('INSERT INTO t VALUES (2)');
    let refusal: unknown;
    try {
      first.exec('INSERT INTO t VALUES (3)');
    } catch (err) {
      refusal = err;
    } finally {
      first.exec('ROLLBACK');
      first.close();
      second.close();
    }
    assert.equal((refusal as { code?: string })?.code, 'SQLITE_BUSY_SNAPSHOT');
    assert.equal(isDatabaseOutage(refusal), true);
    assert.equal(unavailableDependency(refusal), 'database');
    assert.equal(isDatabaseOutage(Object.assign(new Error('constraint'), { code: 'SQLITE_CONSTRAINT_UNIQUE' })), false);
  });
});

describe('the Redis limiter, created before its Redis exists', () => {
  let redis: RedisServer;
  let limiter: RedisLimiter;
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  process.on('unhandledRejection', onRejection);
  after(async () => {
    process.off('unhandledRejection', onRejection);
    await limiter?.close();
    await redis?.stop();
  });

  test('every call while Redis is down throws DependencyUnavailable("redis"); it answers once Redis starts; no unhandled rejection', async () => {
    redis = await startRedis({ down: true });
    limiter = redisLimiter(redis.url);
    const windows = [{ limit: 10, windowMs: 60_000 }];
    // Over several reconnect attempts, not only the first connection.
    for (let i = 0; i < 5; i++) {
      const err = await limiter.hit('k', windows).then(
        () => assert.fail('a hit succeeded without Redis'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof DependencyUnavailable, `call ${i}: ${String(err)}`);
      assert.equal(unavailableDependency(err), 'redis');
      await new Promise((r) => setTimeout(r, 300));
    }

    await redis.startAgain();
    const started = Date.now();
    for (;;) {
      const decision = await limiter.hit('k', windows).catch(() => null);
      if (decision) {
        assert.equal(decision.allowed, true);
        break;
      }
      assert.ok(Date.now() - started < 10_000, 'the limiter did not recover within 10 s of Redis starting');
      await new Promise((r) => setTimeout(r, 100));
    }
    await limiter.probe();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(rejections, []);
  });
});
