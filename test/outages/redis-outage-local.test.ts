import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import type { Registry } from 'prom-client';
import { call } from '../support/gateway.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import type { RedisServer } from '../support/redis.ts';
import type { TwoChatInstances } from '../support/two-chat-instances.ts';
import { until } from '../support/until.ts';
import { chatBody, startRedisLimitedPair } from './support.ts';

/** The chat limit per wallet, shared by INSTANCES instances: each may allow PER_MINUTE / INSTANCES alone. */
const PER_MINUTE = 6;
/** As startRedisLimitedPair configures them. */
const INSTANCES = 2;
const AUTH_FAILURES_PER_MINUTE = 4;

async function metric(registry: Registry, name: string): Promise<number> {
  const m = registry.getSingleMetric(name);
  assert.ok(m, `${name} is registered`);
  return (await m.get()).values.reduce((sum, v) => sum + v.value, 0);
}

const count = (text: string, pattern: RegExp) => (text.match(new RegExp(pattern, 'g')) ?? []).length;

/**
 * Rate limits in Redis only pace requests; money is the ledger's (PostgreSQL). With the default
 * `rateLimits.redisOutage: local`, a Redis outage must not be a full outage: two instances keep
 * serving, each enforcing its share of the limits, /health says degraded with 200 (the load
 * balancer keeps sending traffic), the transition is logged once and counted, and the shared
 * limiter decides again as soon as Redis answers.
 */
describe('Redis outage with redisOutage: local (the default): two instances keep serving on their share of the limits', () => {
  let redis: RedisServer;
  let a: ChatHarness;
  let b: ChatHarness;
  let instances: TwoChatInstances | undefined;
  before(async () => {
    instances = await startRedisLimitedPair(PER_MINUTE, AUTH_FAILURES_PER_MINUTE);
    ({ redis, a, b } = instances);
  });
  afterEach(async () => {
    await a.gw.assertLedger();
  });
  after(() => instances?.stop());

  const chat = (h: ChatHarness, key: string) => call(h.gw.url, 'POST', '/v1/chat/completions', chatBody, { authorization: `Bearer ${key}` });

  test('Redis stopped: chat, models and keys still answer; /health is 200 degraded; one log line and a metric; Redis back: shared again', async () => {
    const w = await a.wallet(1_000_000);
    assert.equal((await chat(a, w.key)).status, 200);

    await redis.kill();
    for (const h of [a, b]) {
      const res = await chat(h, w.key);
      assert.equal(res.status, 200, `chat during the outage: ${res.text}`);
      assert.equal(res.headers.get('x-ratelimit-limit'), String(PER_MINUTE / INSTANCES), 'the instance enforces its share');
      assert.equal((await call(h.gw.url, 'GET', '/v1/models')).status, 200);
    }
    const other = await b.wallet(1_000_000);
    assert.equal((await chat(b, other.key)).status, 200, 'a key made during the outage works');

    const health = await call(a.gw.url, 'GET', '/health');
    assert.equal(health.status, 200, `the load balancer must keep this instance: ${health.text}`);
    assert.equal(health.body.status, 'degraded');
    assert.equal(health.body.rateLimits, 'local');
    assert.deepEqual(health.body.checks, { database: 'ok', redis: 'down' });

    const registry = a.gw.services.metrics.registry;
    assert.equal(await metric(registry, 'tollgate_ratelimit_degraded'), 1);
    const localDecisions = await metric(registry, 'tollgate_ratelimit_local_decisions_total');
    assert.ok(localDecisions >= 2, `decisions made locally (a chat and a model list): ${localDecisions}`);
    const switched = /Redis is not answering: rate limits are enforced by each instance alone/;
    assert.equal(count(a.gw.logs(), switched), 1, 'logged once per transition, not per request');
    assert.doesNotMatch(a.gw.logs(), /"statusCode":5\d\d/);

    await redis.startAgain();
    await until(async () => !a.gw.services.rateLimitsDegraded() && !b.gw.services.rateLimitsDegraded(), 'both instances use Redis again', 15_000);
    assert.equal(count(a.gw.logs(), /Redis answers again/), 1);
    assert.equal(await metric(registry, 'tollgate_ratelimit_degraded'), 0);
    const res = await chat(a, w.key);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ratelimit-limit'), String(PER_MINUTE), 'the shared limit decides again');
    assert.equal(await metric(registry, 'tollgate_ratelimit_local_decisions_total'), localDecisions, 'nothing decided locally once Redis answers');
    await until(async () => (await call(a.gw.url, 'GET', '/health')).body?.status === 'ok', '/health ok again', 5_000);
  });

  describe('attack: a Redis outage does not lift the limit', () => {
    test("one wallet hammering both instances during the outage is served its instances' shares, never more than the limit", async () => {
      await redis.kill();
      const w = await a.wallet(1_000_000);
      const before = a.fake.received.length + b.fake.received.length;
      const statuses = await Promise.all(Array.from({ length: 10 }, (_, i) => chat(i % 2 ? b : a, w.key).then((r) => r.status)));
      const served = statuses.filter((s) => s === 200).length;
      assert.equal(served, PER_MINUTE, `statuses: ${statuses.join(' ')}`);
      assert.equal(statuses.filter((s) => s === 429).length, 10 - PER_MINUTE);
      assert.equal(a.fake.received.length + b.fake.received.length - before, PER_MINUTE, 'only the allowed requests reached a provider');
      await redis.startAgain();
      await until(async () => !a.gw.services.rateLimitsDegraded() && !b.gw.services.rateLimitsDegraded(), 'both instances use Redis again', 15_000);
    });

    test("guessing API keys during the outage is still stopped per address, at the instance's share of rateLimits.authFailures", async () => {
      await redis.kill();
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await chat(a, `sk-${String(i).padStart(43, 'x')}`)).status);
      const share = AUTH_FAILURES_PER_MINUTE / INSTANCES;
      assert.deepEqual(statuses, [...Array(share).fill(401), 429, 429], 'a failure over the share is refused, and the address stays blocked');
      assert.ok(a.gw.services.rateLimitsDegraded());
      await redis.startAgain();
      await until(async () => !a.gw.services.rateLimitsDegraded() && !b.gw.services.rateLimitsDegraded(), 'both instances use Redis again', 15_000);
    });
  });
});
