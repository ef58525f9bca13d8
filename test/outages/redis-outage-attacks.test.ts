import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { after, afterEach, before, describe, test } from 'node:test';
import { call } from '../support/gateway.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import type { RedisServer } from '../support/redis.ts';
import { createKeyProof, newAccount } from '../support/siwe.ts';
import type { TwoChatInstances } from '../support/two-chat-instances.ts';
import { until } from '../support/until.ts';
import { chatBody, startRedisLimitedPair } from './support.ts';

/** The chat limit per wallet, shared by INSTANCES instances: each may allow SHARE alone while Redis is down. */
const PER_MINUTE = 6;
/** As startRedisLimitedPair configures them. */
const INSTANCES = 2;
const SHARE = PER_MINUTE / INSTANCES;
const AUTH_FAILURES = 4;

/**
 * Attacks on `rateLimits.redisOutage: local` (the default) with two instances on one PostgreSQL and
 * one real redis-server: Redis lost at the moment a wallet has used its limit, flapping (refusing,
 * answering, refusing again, with its counts kept), refusing with OOM / READONLY / NOAUTH, and the
 * single-use state that must not loosen while the limits are local.
 */
describe('attack: Redis outages with redisOutage: local, across two instances', () => {
  let redis: RedisServer;
  let admin: Redis;
  let a: ChatHarness;
  let b: ChatHarness;
  let instances: TwoChatInstances | undefined;
  before(async () => {
    instances = await startRedisLimitedPair(PER_MINUTE, AUTH_FAILURES);
    ({ redis, a, b } = instances);
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
  });
  afterEach(async () => {
    await a.gw.assertLedger();
  });
  after(async () => {
    admin?.disconnect();
    await instances?.stop();
  });

  const chat = (h: ChatHarness, key: string) => call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${key}` });
  /** `n` chats alternating between the instances, one at a time; the statuses. */
  async function hammer(key: string, n: number): Promise<number[]> {
    const statuses: number[] = [];
    for (let i = 0; i < n; i++) statuses.push((await chat(i % 2 ? b : a, key)).status);
    return statuses;
  }
  const served = (statuses: number[]) => statuses.filter((s) => s === 200).length;
  const shared = () => until(async () => !a.gw.services.rateLimitsDegraded() && !b.gw.services.rateLimitsDegraded(), 'both instances use Redis again', 15_000);
  const noServerErrors = () => {
    for (const h of [a, b]) assert.doesNotMatch(h.gw.logs(), /"statusCode":5\d\d/, 'no 5xx during the outage');
  };

  test('Redis lost just after a wallet used its whole limit: the rest of the window gives at most the limit once more, each instance its share (operations.md)', async () => {
    const w = await a.wallet(1_000_000);
    assert.equal(served(await hammer(w.key, PER_MINUTE + 2)), PER_MINUTE, 'the shared limit holds while Redis answers');
    await redis.kill();
    try {
      const first = await hammer(w.key, 2 * PER_MINUTE);
      assert.equal(served(first), INSTANCES * SHARE, `the first window of the outage: each instance its share, documented residual: ${first.join(' ')}`);
      assert.equal(served(first.filter((_, i) => i % 2 === 0)), SHARE, 'instance a gave its share, no more');
    } finally {
      await redis.startAgain();
      await shared();
    }
  });

  test('Redis lost just after a wallet used its whole limit: never more than the limit again, once per instance share (held bound)', async () => {
    const w = await a.wallet(1_000_000);
    assert.equal(served(await hammer(w.key, PER_MINUTE + 2)), PER_MINUTE);
    await redis.kill();
    try {
      const during = served(await hammer(w.key, 3 * PER_MINUTE));
      assert.ok(during <= INSTANCES * SHARE, `served ${during} more during the outage`);
      noServerErrors();
    } finally {
      await redis.startAgain();
      await shared();
    }
  });

  test('flapping (refusing READONLY, answering, refusing again, counts kept): the minute serves at most limit + one share per instance', async () => {
    const w = await a.wallet(1_000_000);
    // A wallet at its limit needs no write (the script only counts); another wallet's request is
    // what finds Redis refusing its writes, on each instance.
    const other = await a.wallet(1_000_000);
    const total: number[] = [];
    total.push(...(await hammer(w.key, PER_MINUTE + 2)));
    const refuse = async () => {
      await admin.call('REPLICAOF', '127.0.0.1', '1');
      for (const h of [a, b]) await chat(h, other.key);
      assert.ok(a.gw.services.rateLimitsDegraded() && b.gw.services.rateLimitsDegraded(), 'READONLY puts both on local limits');
    };
    const answer = async () => {
      await admin.call('REPLICAOF', 'NO', 'ONE');
      await shared();
    };
    try {
      await refuse();
      total.push(...(await hammer(w.key, 2 * PER_MINUTE)));
      await answer();
      total.push(...(await hammer(w.key, 2 * PER_MINUTE)));
      await refuse();
      total.push(...(await hammer(w.key, 2 * PER_MINUTE)));
      await answer();
      total.push(...(await hammer(w.key, 2 * PER_MINUTE)));
      assert.ok(served(total) <= PER_MINUTE + INSTANCES * SHARE, `served ${served(total)} in one minute: ${total.join(' ')}`);
      noServerErrors();
    } finally {
      await admin.call('REPLICAOF', 'NO', 'ONE');
      await shared();
    }
  });

  test('out of memory (maxmemory reached, noeviction) cannot force local limits: the script writes anyway and the shared limit holds', async () => {
    const w = await a.wallet(1_000_000);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      const statuses = await hammer(w.key, 2 * PER_MINUTE);
      assert.equal(served(statuses), PER_MINUTE, statuses.join(' '));
      assert.ok(!a.gw.services.rateLimitsDegraded() && !b.gw.services.rateLimitsDegraded(), 'Redis still runs the limiter');
      noServerErrors();
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
  });

  test('READONLY (Redis demoted to a replica): local share, no 5xx; promoted again: shared limits', async () => {
    const w = await a.wallet(1_000_000);
    await admin.call('REPLICAOF', '127.0.0.1', '1');
    try {
      const statuses = await hammer(w.key, 2 * PER_MINUTE);
      assert.equal(served(statuses), INSTANCES * SHARE, statuses.join(' '));
      assert.ok(a.gw.services.rateLimitsDegraded());
      noServerErrors();
    } finally {
      await admin.call('REPLICAOF', 'NO', 'ONE');
      await shared();
    }
  });

  test('NOAUTH (a password set and connections cut): local share, no 5xx; password removed: shared limits again', async () => {
    const w = await a.wallet(1_000_000);
    const port = Number(new URL(redis.url).port);
    await admin.config('SET', 'requirepass', 'attack-password');
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal').catch(() => undefined);
    try {
      const statuses = await hammer(w.key, 2 * PER_MINUTE);
      assert.equal(served(statuses), INSTANCES * SHARE, statuses.join(' '));
      assert.ok(a.gw.services.rateLimitsDegraded() && b.gw.services.rateLimitsDegraded());
      noServerErrors();
    } finally {
      const authed = new Redis({ host: '127.0.0.1', port, password: 'attack-password', maxRetriesPerRequest: 1 });
      authed.on('error', () => undefined);
      await authed.config('SET', 'requirepass', '');
      authed.disconnect();
      await shared();
    }
  });

  test('single-use state stays single-use while Redis is down: a SIWE proof replayed on the other instance', async () => {
    await redis.kill();
    try {
      const owner = newAccount();
      const proof = await createKeyProof(owner);
      const created = await call(a.gw.url, 'POST', '/v1/auth/keys', proof);
      assert.equal(created.status, 201, created.text);
      const replay = await call(b.gw.url, 'POST', '/v1/auth/keys', proof);
      assert.ok(replay.status === 401 || replay.status === 409, `the proof's nonce was used on the other instance: ${replay.status} ${replay.text}`);
      assert.ok(a.gw.services.rateLimitsDegraded() && b.gw.services.rateLimitsDegraded());
      noServerErrors();
    } finally {
      await redis.startAgain();
      await shared();
    }
  });

  test('guessing API keys on both instances in turn while Redis is down: no more failures answered than rateLimits.authFailures, then 429 on both', async () => {
    await redis.kill();
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4 * AUTH_FAILURES; i++) statuses.push((await chat(i % 2 ? b : a, `sk-${String(i).padStart(43, 'y')}`)).status);
      const answered = statuses.filter((s) => s === 401).length;
      assert.ok(answered <= AUTH_FAILURES, `${answered} guesses answered 401: ${statuses.join(' ')}`);
      assert.deepEqual(statuses.slice(-4), [429, 429, 429, 429], 'both instances refuse the address');
      noServerErrors();
    } finally {
      await redis.startAgain();
      await shared();
    }
  });
});
