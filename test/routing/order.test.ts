import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { orderByWeight } from '../../src/routing/order.ts';
import { actionForStatus, actionForTransportError, coolsDeployment } from '../../src/routing/classify.ts';
import { parseRetryAfter, retryDelayMs } from '../../src/routing/backoff.ts';

/** A seeded generator, so the shares are the same on every run. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
}

describe('deployment order and weights', () => {
  test('unweighted deployments keep their order', () => {
    const list = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
    assert.deepEqual(
      orderByWeight(list).map((d) => d.id),
      ['a', 'b', 'c'],
    );
  });

  test('adjacent weighted deployments share the first place in proportion to their weights; the unweighted one stays last', () => {
    const list = [{ id: 'a', weight: 3 }, { id: 'b', weight: 1 }, { id: 'c' }];
    const random = seeded(7);
    const first = { a: 0, b: 0 } as Record<string, number>;
    for (let i = 0; i < 4000; i++) {
      const order = orderByWeight(list, random).map((d) => d.id);
      assert.equal(order.length, 3);
      assert.equal(order[2], 'c');
      first[order[0]!]!++;
    }
    const share = first.a! / 4000;
    assert.ok(share > 0.71 && share < 0.79, `a went first ${share} of the time; expected about 0.75`);
  });

  test('a weighted rank after an unweighted primary is shuffled only within itself', () => {
    const list = [{ id: 'p' }, { id: 'x', weight: 1 }, { id: 'y', weight: 1 }];
    for (let i = 0; i < 50; i++) assert.equal(orderByWeight(list)[0]!.id, 'p');
  });
});

describe('failure classification', () => {
  test('statuses that move on, retry, or stop', () => {
    for (const s of [408, 409, 429, 500, 502, 503, 504, 529, 520]) assert.equal(actionForStatus(s), 'retry', String(s));
    for (const s of [401, 402, 403]) assert.equal(actionForStatus(s), 'next', String(s));
    for (const s of [400, 404, 413, 422]) assert.equal(actionForStatus(s), 'stop', String(s));
  });

  test('transport errors before the first byte retry; our own abort stops', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_SOCKET'])
      assert.equal(actionForTransportError({ code }, 'streamed'), 'retry', code);
    for (const delivery of ['streamed', 'whole'] as const)
      assert.equal(actionForTransportError({ name: 'AbortError', code: 'UND_ERR_ABORTED' }, delivery), 'stop');
  });

  test("a first-byte timeout of an answer sent whole moves on without a retry and never cools (the request's size may be the cause); other transport errors still retry and cool", () => {
    assert.equal(actionForTransportError({ code: 'UND_ERR_HEADERS_TIMEOUT' }, 'whole'), 'next');
    assert.equal(coolsDeployment({ code: 'UND_ERR_HEADERS_TIMEOUT' }, 'whole'), false);
    assert.equal(coolsDeployment({ code: 'UND_ERR_HEADERS_TIMEOUT' }, 'streamed'), true);
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_SOCKET']) {
      assert.equal(actionForTransportError({ code }, 'whole'), 'retry', code);
      assert.equal(coolsDeployment({ code }, 'whole'), true, code);
    }
  });
});

describe('retry delays', () => {
  test('Retry-After in seconds or as an HTTP date; nonsense is ignored', () => {
    assert.equal(parseRetryAfter('2'), 2000);
    assert.equal(parseRetryAfter(['3']), 3000);
    assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6000);
    assert.equal(parseRetryAfter('soon'), undefined);
    assert.equal(parseRetryAfter(undefined), undefined);
  });

  test("the provider's Retry-After wins up to the cap; null beyond it; jitter otherwise", () => {
    const o = { baseMs: 200, maxRetryAfterMs: 5000 };
    assert.equal(
      retryDelayMs(0, 3000, o, () => 0.9),
      3000,
    );
    assert.equal(
      retryDelayMs(0, 6000, o, () => 0.9),
      null,
    );
    assert.equal(
      retryDelayMs(2, undefined, o, () => 0.25),
      200,
    );
    assert.equal(
      retryDelayMs(0, undefined, o, () => 0),
      0,
    );
  });
});
