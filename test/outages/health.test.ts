import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startAnvil, type Anvil } from '../../src/devchain/anvil.ts';
import { createHealthMonitor, type DependencyProbe } from '../../src/health-checks.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { startRedis, type RedisServer } from '../support/redis.ts';

describe('/health names every dependency', () => {
  let anvil: Anvil;
  let redis: RedisServer;
  let gw: TestGateway;
  before(async () => {
    anvil = await startAnvil();
    redis = await startRedis();
    gw = await startTestGateway({
      engine: 'sqlite',
      config: { chains: { [String(anvil.chainId)]: { rpcUrl: anvil.rpcUrl } }, rateLimits: { backend: 'redis' } },
      env: { TOLLGATE_REDIS_URL: redis.url },
    });
  });
  after(async () => {
    await gw?.stop();
    await redis?.stop();
    await anvil?.stop();
  });

  test('database, Redis and each chain RPC are reported; an RPC outage is reported without draining the instance', async () => {
    const rpc = `rpc:${anvil.chainId}`;
    const ok = await call(gw.url, 'GET', '/health');
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body, { status: 'ok', checks: { database: 'ok', redis: 'ok', [rpc]: 'ok' } });

    await anvil.stop();
    let res = ok;
    for (const until = Date.now() + 30_000; res.body.checks[rpc] !== 'down' && Date.now() < until; ) {
      await new Promise((r) => setTimeout(r, 200));
      res = await call(gw.url, 'GET', '/health');
    }
    assert.equal(res.status, 200, 'chat, keys and usage still work without the RPC: the instance stays in rotation');
    assert.deepEqual(res.body, { status: 'ok', checks: { database: 'ok', redis: 'ok', [rpc]: 'down' } });
    assert.doesNotMatch(gw.logs(), new RegExp(anvil.rpcUrl.replace(/[.]/g, '\\.')), 'RPC URLs (which may hold API keys) stay out of the log');
  });
});

describe('health monitor', () => {
  const probe = (name: string, required: boolean, check: () => Promise<unknown>) => {
    const p = { name, required, calls: 0, check: () => (p.calls++, check()) };
    return p;
  };

  test('concurrent callers share one probe round, and the round is reused while fresh', async () => {
    const db = probe('database', true, async () => undefined);
    const monitor = createHealthMonitor([db], () => undefined, { cacheMs: 60_000 });
    const reports = await Promise.all(Array.from({ length: 20 }, () => monitor.report()));
    assert.ok(reports.every((r) => r.healthy));
    await monitor.report();
    assert.equal(db.calls, 1);
  });

  test('a probe that never answers is down after its timeout; only required ones make the instance unhealthy', async () => {
    const hung = probe('redis', true, () => new Promise(() => undefined));
    const rpc = probe('rpc:8453', false, async () => {
      throw new Error('refused');
    });
    const db = probe('database', true, async () => undefined);
    const changes: string[] = [];
    const monitor = createHealthMonitor([db, hung, rpc] as DependencyProbe[], (name, status) => changes.push(`${name} ${status}`), {
      timeoutMs: 50,
      cacheMs: 0,
    });
    const report = await monitor.report();
    assert.deepEqual(report, { healthy: false, checks: { database: 'ok', redis: 'down', 'rpc:8453': 'down' }, down: ['redis'] });
    await monitor.report();
    assert.deepEqual(changes.sort(), ['redis down', 'rpc:8453 down'], 'a lasting outage is logged once, not on every probe');
  });

  test('recovers by itself once the dependency answers again', async () => {
    let up = false;
    const db = probe('database', true, async () => {
      if (!up) throw new Error('ECONNREFUSED');
    });
    const changes: string[] = [];
    const monitor = createHealthMonitor([db], (name, status) => changes.push(`${name} ${status}`), { cacheMs: 0 });
    assert.equal((await monitor.report()).healthy, false);
    up = true;
    assert.equal((await monitor.report()).healthy, true);
    assert.deepEqual(changes, ['database down', 'database ok']);
  });
});
