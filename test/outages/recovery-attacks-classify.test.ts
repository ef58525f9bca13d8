import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { DatabaseError } from 'pg-protocol/dist/messages.js';
import { ReplyError } from 'ioredis';
import { MaxRetriesPerRequestError } from 'ioredis/built/errors/index.js';
import { HttpRequestError, TimeoutError, RpcRequestError, InternalRpcError, LimitExceededRpcError, CallExecutionError } from 'viem';
import { unavailableDependency } from '../../src/http/errors.ts';
import { DependencyUnavailable } from '../../src/outage.ts';
import { isRedisOutage } from '../../src/ratelimit/redis.ts';
import { isDatabaseOutage } from '../../src/storage/database-outage.ts';

const sock = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, syscall: 'connect' });
const pgErr = (code: string, msg: string) => Object.assign(new DatabaseError(msg, msg.length, 'error'), { code, severity: 'FATAL' });

/** What a limiter's send() would throw for a raw ioredis error. */
const viaLimiter = (e: Error) => (isRedisOutage(e) ? new DependencyUnavailable('redis', { cause: e }) : e);

describe('attack: which dependency each 503 names', () => {
  const cases: [string, unknown, string | null][] = [
    ['pg 57P01 admin shutdown', pgErr('57P01', 'terminating connection due to administrator command'), 'database'],
    ['pg 53300 too many connections', pgErr('53300', 'sorry, too many clients already'), 'database'],
    ['pg 57P03 cannot connect now', pgErr('57P03', 'the database system is starting up'), 'database'],
    ['pg ETIMEDOUT', sock('ETIMEDOUT'), 'database'],
    ['pg ENOTFOUND', sock('ENOTFOUND'), 'database'],
    ['pg Connection terminated', new Error('Connection terminated unexpectedly'), 'database'],
    ['pg pool connect timeout', new Error('timeout exceeded when trying to connect'), 'database'],
    ['pg syntax error 42601 is not an outage', pgErr('42601', 'syntax error'), null],
    ['ioredis MaxRetriesPerRequestError via limiter', viaLimiter(new MaxRetriesPerRequestError(1) as unknown as Error), 'redis'],
    ['ioredis Connection is closed via limiter', viaLimiter(new Error('Connection is closed.')), 'redis'],
    ['ioredis NOAUTH via limiter', viaLimiter(new ReplyError('NOAUTH Authentication required.')), 'redis'],
    ['ioredis WRONGPASS via limiter', viaLimiter(new ReplyError('WRONGPASS invalid username-password pair or user is disabled.')), 'redis'],
    [
      'ioredis MISCONF via limiter',
      viaLimiter(new ReplyError('MISCONF Redis is configured to save RDB snapshots, but it is currently not able to persist on disk.')),
      'redis',
    ],
    ['ioredis NOPERM via limiter', viaLimiter(new ReplyError("NOPERM User default has no permissions to run the 'evalsha' command")), 'redis'],
    [
      'viem HttpRequestError (ECONNREFUSED cause)',
      new HttpRequestError({ url: 'http://127.0.0.1:8545', cause: new TypeError('fetch failed', { cause: sock('ECONNREFUSED') }) as Error }),
      'rpc',
    ],
    ['viem TimeoutError', new TimeoutError({ body: {}, url: 'http://127.0.0.1:8545' }), 'rpc'],
    ['viem HTTP 503 from the RPC', new HttpRequestError({ url: 'http://127.0.0.1:8545', status: 503, details: 'Service Unavailable' }), 'rpc'],
    [
      'viem CallExecutionError wrapping HttpRequestError',
      new CallExecutionError(new HttpRequestError({ url: 'http://127.0.0.1:8545', cause: sock('ECONNREFUSED') }), {
        to: '0x0000000000000000000000000000000000000001',
      } as never),
      'rpc',
    ],
    [
      'viem InternalRpcError (-32603, node behind LB down)',
      new InternalRpcError(new RpcRequestError({ body: {}, url: 'http://x', error: { code: -32603, message: 'internal error' } })),
      'rpc',
    ],
    [
      'viem LimitExceededRpcError (-32005)',
      new LimitExceededRpcError(new RpcRequestError({ body: {}, url: 'http://x', error: { code: -32005, message: 'limit exceeded' } })),
      'rpc',
    ],
    [
      'redis tag nested 6 causes deep with ECONNREFUSED',
      (() => {
        let e: Error = new DependencyUnavailable('redis', { cause: sock('ECONNREFUSED') });
        for (let i = 0; i < 6; i++) e = new Error(`wrap ${i}`, { cause: e });
        return e;
      })(),
      'redis',
    ],
    [
      'redis tag inside an AggregateError member',
      new AggregateError([sock('ECONNREFUSED'), new DependencyUnavailable('redis', { cause: sock('ECONNREFUSED') })]),
      'redis',
    ],
    [
      'an AbortSignal.timeout DOMException (not from the RPC)',
      (() => {
        try {
          AbortSignal.timeout(0);
        } catch {
          /* */
        }
        return new DOMException('The operation was aborted due to timeout', 'TimeoutError');
      })(),
      null,
    ],
  ];
  for (const [what, err, expected] of cases) {
    test(what, () => {
      assert.equal(unavailableDependency(err), expected, `${what}: ${String((err as Error)?.message)}`);
    });
  }
  test('isDatabaseOutage never true for a tagged redis error', () => {
    assert.equal(isDatabaseOutage(new Error('x', { cause: new DependencyUnavailable('redis', { cause: sock('ECONNREFUSED') }) })), false);
  });
});

describe('attack: an error whose cause chain loops reaches the 503 classifier', () => {
  test('unavailableDependency returns (a cycle must not hang the event loop)', () => {
    // In a child with a deadline: in this process a hang would stop the whole test file.
    const script =
      "import('./src/http/errors.ts').then((m) => { const a = new Error('a'); const b = new Error('b', { cause: a }); a.cause = b; console.log('answer=' + m.unavailableDependency(a)); })";
    const r = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], { cwd: process.cwd(), timeout: 15_000, encoding: 'utf8' });
    assert.equal(r.signal, null, `unavailableDependency did not return within 15 s (killed by ${r.signal}): the event loop spins for ever`);
    assert.match(r.stdout, /answer=null/);
  });
});
