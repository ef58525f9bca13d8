import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runAttempts, type AttemptOutcome, type ChainOptions } from '../../src/routing/attempts.ts';
import { CooldownBoard } from '../../src/routing/cooldown.ts';

type D = { id: string; weight?: number };
const A: D = { id: 'a' };
const B: D = { id: 'b' };
const C: D = { id: 'c' };

const fail = (action: 'retry' | 'next' | 'stop', extra: { status?: number; retryAfterMs?: number } = {}): AttemptOutcome<string, string> => ({
  ok: false,
  action,
  error: `failed ${action}`,
  ...extra,
});
const ok = (value: string): AttemptOutcome<string, string> => ({ ok: true, value });

/** A clock the test moves, sleeps that move it, and a board that never cools unless asked. */
function harness(over: Partial<ChainOptions<D>> = {}) {
  let now = 0;
  const slept: number[] = [];
  const cooldown = new CooldownBoard(
    () => ({ failures: 1000, windowMs: 60_000, cooldownMs: 30_000 }),
    () => now,
  );
  const opts: ChainOptions<D> = {
    retries: 0,
    backoffMs: 100,
    maxRetryAfterMs: 5000,
    deadline: 120_000,
    cooldown,
    now: () => now,
    random: () => 0.5,
    sleep: async (ms) => {
      slept.push(ms);
      now += ms;
    },
    ...over,
  };
  return { opts, slept, advance: (ms: number) => (now += ms), cooldown };
}

/** An attempt function answering from a script per deployment, recording the calls. */
function scripted(script: Record<string, AttemptOutcome<string, string>[]>) {
  const calls: string[] = [];
  return {
    calls,
    attempt: async (d: D) => {
      calls.push(d.id);
      return script[d.id]!.shift() ?? fail('retry');
    },
  };
}

describe('the attempt chain', () => {
  test('the first deployment that succeeds serves; those after it are never called', async () => {
    const { opts } = harness();
    const s = scripted({ a: [ok('from a')], b: [ok('from b')] });
    const out = await runAttempts([A, B], s.attempt, opts);
    assert.deepEqual(out, { ok: true, value: 'from a', target: A, attempts: 1 });
    assert.deepEqual(s.calls, ['a']);
  });

  test('retry and next failures move on, in order', async () => {
    const { opts } = harness();
    const s = scripted({ a: [fail('retry', { status: 503 })], b: [fail('next', { status: 401 })], c: [ok('from c')] });
    const out = await runAttempts([A, B, C], s.attempt, opts);
    assert.equal(out.ok && out.target, C);
    assert.deepEqual(s.calls, ['a', 'b', 'c']);
  });

  test('a stop ends the chain: the request itself was refused, so no fallback is called', async () => {
    const { opts } = harness();
    const s = scripted({ a: [fail('stop', { status: 400 })], b: [ok('from b')] });
    const out = await runAttempts([A, B], s.attempt, opts);
    assert.equal(out.ok, false);
    assert.equal(!out.ok && out.ended, 'stopped');
    assert.deepEqual(s.calls, ['a']);
  });

  test('every deployment failing with retries 0: each is tried exactly once, the last failure is returned', async () => {
    const { opts } = harness();
    const s = scripted({ a: [fail('retry', { status: 500 })], b: [fail('retry', { status: 502 })] });
    const out = await runAttempts([A, B], s.attempt, opts);
    assert.deepEqual(s.calls, ['a', 'b']);
    assert.ok(!out.ok && out.ended === 'exhausted' && out.last?.status === 502 && out.attempts === 2);
  });

  test('retries: a retry failure is retried on the same deployment with jittered, doubling backoff', async () => {
    const { opts, slept } = harness({ retries: 2 });
    const s = scripted({ a: [fail('retry'), fail('retry'), fail('retry')], b: [ok('from b')] });
    await runAttempts([A, B], s.attempt, opts);
    assert.deepEqual(s.calls, ['a', 'a', 'a', 'b']);
    // random() = 0.5 of 100 × 2^retry.
    assert.deepEqual(slept, [50, 100]);
  });

  test('a next failure (a refused key) is not retried on the same deployment', async () => {
    const { opts } = harness({ retries: 3 });
    const s = scripted({ a: [fail('next', { status: 401 })], b: [ok('from b')] });
    await runAttempts([A, B], s.attempt, opts);
    assert.deepEqual(s.calls, ['a', 'b']);
  });

  test('Retry-After is honoured up to the cap; beyond it the next deployment is tried at once', async () => {
    const { opts, slept } = harness({ retries: 1, maxRetryAfterMs: 2000 });
    const s = scripted({
      a: [fail('retry', { status: 429, retryAfterMs: 1500 }), fail('retry', { status: 429 })],
      b: [fail('retry', { status: 429, retryAfterMs: 10_000 })],
      c: [ok('c')],
    });
    await runAttempts([A, B, C], s.attempt, opts);
    assert.deepEqual(s.calls, ['a', 'a', 'b', 'c']);
    assert.deepEqual(slept, [1500]);
  });

  test('the deadline: no attempt starts after it, and no backoff waits past it', async () => {
    const { opts, advance } = harness({ retries: 5, deadline: 1000 });
    const calls: string[] = [];
    const out = await runAttempts(
      [A, B],
      async (d) => {
        calls.push(d.id);
        advance(600);
        return fail('retry');
      },
      opts,
    );
    // a at 0 (to 600), a backoff of 50, a again at 650 (to 1250): past the deadline, b never starts.
    assert.deepEqual(calls, ['a', 'a']);
    assert.ok(!out.ok && out.ended === 'deadline');
    // A backoff that would end past the deadline is not waited: the next deployment is tried at once.
    const late = harness({ retries: 5, deadline: 1000 });
    const lateCalls: string[] = [];
    await runAttempts(
      [A, B],
      async (d) => {
        lateCalls.push(d.id);
        late.advance(d === A ? 960 : 10);
        return d === A ? fail('retry') : ok('b');
      },
      late.opts,
    );
    assert.deepEqual(lateCalls, ['a', 'b']);
    assert.deepEqual(late.slept, []);
  });

  test('cancelled (the client left): the chain ends before the next attempt', async () => {
    let gone = false;
    const { opts } = harness({ cancelled: () => gone });
    const out = await runAttempts(
      [A, B],
      async () => {
        gone = true;
        return fail('retry');
      },
      opts,
    );
    assert.ok(!out.ok && out.ended === 'cancelled' && out.attempts === 1);
  });

  test('the observer hears each attempt, failure and fallback', async () => {
    const { opts } = harness();
    const events: string[] = [];
    opts.observer = {
      attempt: (d, retry) => events.push(`attempt ${d.id} ${retry}`),
      failed: (d, f) => events.push(`failed ${d.id} ${f.status}`),
      fellBack: (from, to) => events.push(`fallback ${from.id}->${to.id}`),
    };
    const s = scripted({ a: [fail('retry', { status: 503 })], b: [ok('b')] });
    await runAttempts([A, B], s.attempt, opts);
    assert.deepEqual(events, ['attempt a 0', 'failed a 503', 'fallback a->b', 'attempt b 0']);
  });
});

describe('cooldown', () => {
  const board = (failures = 2) => {
    let now = 0;
    const b = new CooldownBoard(
      () => ({ failures, windowMs: 10_000, cooldownMs: 30_000 }),
      () => now,
    );
    return { b, advance: (ms: number) => (now += ms) };
  };

  test('N failures within the window start a cooldown; it ends by itself', () => {
    const { b, advance } = board();
    assert.equal(b.recordFailure('a'), false);
    assert.equal(b.isCooling('a'), false);
    assert.equal(b.recordFailure('a'), true);
    assert.equal(b.isCooling('a'), true);
    assert.deepEqual(b.cooling(), [{ deployment: 'a', remainingMs: 30_000 }]);
    advance(30_000);
    assert.equal(b.isCooling('a'), false);
    assert.deepEqual(b.cooling(), []);
  });

  test('failures further apart than the window do not add up', () => {
    const { b, advance } = board();
    b.recordFailure('a');
    advance(10_001);
    assert.equal(b.recordFailure('a'), false);
    assert.equal(b.isCooling('a'), false);
  });

  test('a cooling deployment goes last, and first again after the cooldown (recovery)', async () => {
    const { opts, advance, cooldown } = harness();
    const cool = new CooldownBoard(() => ({ failures: 1, windowMs: 60_000, cooldownMs: 30_000 }), opts.now!);
    opts.cooldown = cool;
    const deferred: string[] = [];
    opts.observer = { deferred: (d) => deferred.push(d.id) };
    const s = scripted({ a: [fail('retry'), ok('a recovered')], b: [ok('b1'), ok('b2'), ok('b3')] });
    assert.equal((await runAttempts([A, B], s.attempt, opts)).ok, true); // a fails (cools), b serves
    const second = await runAttempts([A, B], s.attempt, opts); // a put last: b serves first
    assert.ok(second.ok && second.target === B);
    assert.deepEqual(deferred, ['a']);
    advance(30_000);
    const third = await runAttempts([A, B], s.attempt, opts);
    assert.ok(third.ok && third.value === 'a recovered');
    assert.deepEqual(s.calls, ['a', 'b', 'b', 'a']);
    assert.ok(cooldown);
  });

  test("a stop failure (the request's fault) never counts toward a cooldown", async () => {
    const { opts } = harness();
    opts.cooldown = new CooldownBoard(() => ({ failures: 1, windowMs: 60_000, cooldownMs: 30_000 }), opts.now!);
    await runAttempts([A], async () => fail('stop', { status: 400 }), opts);
    assert.equal(opts.cooldown.isCooling('a'), false);
  });

  test('every deployment cooling: all are tried anyway, in order', async () => {
    const { opts } = harness();
    opts.cooldown = new CooldownBoard(() => ({ failures: 1, windowMs: 60_000, cooldownMs: 30_000 }), opts.now!);
    opts.cooldown.recordFailure('a');
    opts.cooldown.recordFailure('b');
    const s = scripted({ a: [fail('retry')], b: [ok('b')] });
    const out = await runAttempts([A, B], s.attempt, opts);
    assert.ok(out.ok && out.target === B);
    assert.deepEqual(s.calls, ['a', 'b']);
  });

  test('a cooling deployment is tried after every ready one failed, instead of never', async () => {
    const { opts } = harness();
    opts.cooldown = new CooldownBoard(() => ({ failures: 1, windowMs: 60_000, cooldownMs: 30_000 }), opts.now!);
    opts.cooldown.recordFailure('a');
    const s = scripted({ a: [ok('a, cooling but well')], b: [fail('retry', { status: 503 })], c: [fail('next', { status: 401 })] });
    const out = await runAttempts([A, B, C], s.attempt, opts);
    assert.ok(out.ok && out.target === A);
    assert.deepEqual(s.calls, ['b', 'c', 'a']);
  });

  test('the outcome counts the deployments really called: a deadline before the last one says so', async () => {
    const { opts, advance } = harness({ retries: 1 });
    const s = scripted({ a: [fail('retry'), fail('retry')], b: [ok('b')] });
    const attempt = async (d: D) => {
      advance(70_000);
      return s.attempt(d);
    };
    const out = await runAttempts([A, B], attempt, opts);
    assert.ok(!out.ok);
    assert.deepEqual([out.ended, out.attempts, out.deploymentsTried], ['deadline', 2, 1]);
    assert.deepEqual(s.calls, ['a', 'a']);
  });
});
