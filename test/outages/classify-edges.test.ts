import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ReplyError } from 'ioredis';
import { InternalRpcError, RpcRequestError } from 'viem';
import { relayerRefusal } from '../../src/payments/relayer/broadcast-refusal.ts';
import { unavailableDependency } from '../../src/http/errors.ts';
import { isRedisOutage } from '../../src/ratelimit/redis.ts';

/** The other side of B1 and B3 (Redis outage classification): what must stay a 500 or the call's own answer. */
describe('classification edges of the 23.4 fixes', () => {
  test('a bug in the limiter script is not a Redis outage (500, logged), a refusal raised inside it is', () => {
    assert.equal(
      isRedisOutage(new ReplyError("ERR user_script:3: Script attempted to access nonexistent global variable 'x' script: abc, on @user_script:3.")),
      false,
    );
    assert.equal(isRedisOutage(new ReplyError('ERR Error running script (call to f_abc): @user_script:1: attempt to compare nil with number')), false);
    assert.equal(isRedisOutage(new ReplyError('ERR Error running script (call to f_abc): @user_script:17: -MISCONF Errors writing to disk')), true);
    assert.equal(isRedisOutage(new ReplyError('ERR max number of clients reached')), true);
    for (const code of ['NOREPLICAS', 'NOTREADY', 'READONLY', 'LOADING', 'BUSY']) assert.equal(isRedisOutage(new ReplyError(`${code} something`)), true, code);
  });

  test('a -32000 the node answers about the transaction itself is not "the RPC is down"', () => {
    const nonce = new RpcRequestError({ body: {}, url: 'http://x', error: { code: -32000, message: 'nonce too low' } });
    assert.equal(unavailableDependency(nonce), null);
    const behind = new RpcRequestError({ body: {}, url: 'http://x', error: { code: -32000, message: 'header not found' } });
    assert.equal(unavailableDependency(behind), 'rpc');
    const known = new InternalRpcError(new RpcRequestError({ body: {}, url: 'http://x', error: { code: -32603, message: 'already known' } }));
    assert.equal(unavailableDependency(known), null, 'a provider that puts a refusal under -32603');
  });

  test('a cause chain that loops does not hang the relayer refusal reader', () => {
    const a = new Error('a');
    const b = new Error('nonce too low', { cause: a });
    (a as { cause?: unknown }).cause = b;
    assert.equal(relayerRefusal(a), 'nonce too low');
    const c = new Error('c');
    (c as { cause?: unknown }).cause = c;
    assert.equal(relayerRefusal(c), null);
  });
});
