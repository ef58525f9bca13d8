import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CountingBudget, SMALL_COUNT_BYTES } from '../../src/metered/counting-budget.ts';
import { ApiError } from '../../src/refusal.ts';
import { countTokens } from '../../src/metered/usage-estimate.ts';

const MIB = 1024 * 1024;

test('count_tokens takes on two maximal bodies per key and eight per instance at once; beyond, a 429 with Retry-After', () => {
  const budget = new CountingBudget({ perWalletBytes: 8 * MIB, instanceBytes: 32 * MIB });
  const first = budget.take('1', 4 * MIB);
  budget.take('1', 4 * MIB);
  const refused = (() => {
    try {
      budget.take('1', 1);
    } catch (e) {
      return e;
    }
  })();
  assert.ok(refused instanceof ApiError);
  assert.equal(refused.status, 429);
  assert.equal(refused.code, 'RATE_LIMITED');
  assert.equal(refused.headers['retry-after'], '1');
  first();
  first(); // given back once only
  budget.take('1', 4 * MIB);
  // Other keys fill the instance up to its bound.
  for (let k = 2; k <= 7; k++) budget.take(String(k), 4 * MIB);
  assert.throws(
    () => budget.take('8', 4 * MIB),
    (e: ApiError) => e.status === 429 && /counting/.test(e.message),
  );
});

test('a body larger than the per-key share is taken when the key has nothing else being counted', () => {
  const budget = new CountingBudget({ perWalletBytes: 1, instanceBytes: 1 });
  const release = budget.take('1', 100);
  release();
  budget.take('1', 100);
});

test('a small count started behind a long one finishes first: the CPU lane takes turns', async () => {
  await countTokens('warm up');
  const order: string[] = [];
  const long = countTokens('中文'.repeat(512 * 1024)).then(() => order.push('long'));
  await new Promise((r) => setImmediate(r));
  const short = countTokens('word '.repeat(1000)).then(() => order.push('short'));
  await Promise.all([long, short]);
  assert.deepEqual(order, ['short', 'long']);
});

test('attack: a full instance budget still admits a small body, which counts against its wallet only', () => {
  const budget = new CountingBudget({ perWalletBytes: 4 * MIB, instanceBytes: 32 * MIB, alwaysAdmittedBytes: SMALL_COUNT_BYTES });
  for (let w = 1; w <= 8; w++) budget.take(`0xattacker${w}`, 4 * MIB);
  assert.throws(
    () => budget.take('0xother', SMALL_COUNT_BYTES + 1),
    (e: ApiError) => e.status === 429 && /large requests/.test(e.message),
  );
  const small = budget.take('0xother', SMALL_COUNT_BYTES);
  small();
  // The wallet's own bound still holds for small bodies.
  assert.throws(
    () => budget.take('0xattacker1', 1),
    (e: ApiError) => e.status === 429 && /this wallet/.test(e.message),
  );
});

test('check refuses what take would refuse now, and takes nothing (the route asks it on the headers)', () => {
  const budget = new CountingBudget({ perWalletBytes: 8 * MIB, instanceBytes: 8 * MIB, alwaysAdmittedBytes: SMALL_COUNT_BYTES });
  for (let i = 0; i < 10; i++) budget.check('1', 4 * MIB);
  const release = budget.take('1', 4 * MIB);
  budget.take('2', 4 * MIB);
  assert.throws(
    () => budget.check('1', 4 * MIB + 1),
    (e: ApiError) => e.status === 429 && /this wallet/.test(e.message),
  );
  assert.throws(
    () => budget.check('3', 1 * MIB),
    (e: ApiError) => e.status === 429 && /the gateway is counting/.test(e.message),
  );
  budget.check('3', SMALL_COUNT_BYTES);
  release();
  budget.check('3', 4 * MIB);
});
