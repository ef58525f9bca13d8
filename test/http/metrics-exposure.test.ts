import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig, parseConfig } from '../../src/config/load.ts';
import { call, startTestGateway } from '../support/gateway.ts';

// /metrics (revenue per model, locked money, top-up outcomes) must not be public on the API port,
// which binds 0.0.0.0. By default it lives only on its own loopback port; on the API
// port it needs the bearer token named by metrics.tokenEnv.

const TOKEN = 'metrics-token-0123456789abcdef';

describe('/metrics exposure', () => {
  test('by default: 404 on the API port, served on 127.0.0.1:9464', async () => {
    const defaults = parseConfig({});
    assert.equal(defaults.metrics.port, 9464);
    assert.equal(defaults.metrics.host, '127.0.0.1');
    const gw = await startTestGateway({ engine: 'sqlite' }); // port 0 instead of 9464, nothing else changed
    try {
      assert.equal((await call(gw.url, 'GET', '/metrics')).status, 404);
      assert.match(gw.metricsUrl!, /^http:\/\/127\.0\.0\.1:\d+$/);
      assert.equal((await fetch(`${gw.metricsUrl}/metrics`)).status, 200);
    } finally {
      await gw.stop();
    }
  });

  test('with metrics.tokenEnv: on the API port for the token only, and no metrics port', async () => {
    const gw = await startTestGateway({ engine: 'sqlite', config: { metrics: { tokenEnv: 'METRICS_TOKEN' } }, env: { METRICS_TOKEN: TOKEN } });
    try {
      assert.equal(gw.metricsUrl, null);
      for (const authorization of [undefined, 'Bearer wrong', `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, TOKEN]) {
        const res = await call(gw.url, 'GET', '/metrics', undefined, authorization ? { authorization } : {});
        assert.equal(res.status, 401, String(authorization));
        assert.equal(res.body.error, 'UNAUTHORIZED');
        assert.ok(!res.text.includes(TOKEN), 'the token is never echoed');
      }
      const ok = await call(gw.url, 'GET', '/metrics', undefined, { authorization: `Bearer ${TOKEN}` });
      assert.equal(ok.status, 200);
      assert.match(ok.text, /tollgate_http_requests_total/);
    } finally {
      await gw.stop();
    }
  });

  test('a token variable that is unset or short refuses to start', () => {
    for (const env of [{}, { METRICS_TOKEN: '' }, { METRICS_TOKEN: 'short' }]) {
      assert.throws(
        () => parseConfig({ metrics: { tokenEnv: 'METRICS_TOKEN' } }, env),
        (err: Error) => err instanceof ConfigError && /METRICS_TOKEN/.test(err.message),
      );
    }
  });

  test('TOLLGATE_METRICS_PORT gives each instance on a host its own metrics port', () => {
    const config = loadConfig({ cwd: '/nonexistent', env: { TOLLGATE_PORT: '8081', TOLLGATE_METRICS_PORT: '18081' } });
    assert.equal(config.server.port, 8081);
    assert.equal(config.metrics.port, 18081);
    assert.throws(() => loadConfig({ cwd: '/nonexistent', env: { TOLLGATE_METRICS_PORT: '99999' } }), /TOLLGATE_METRICS_PORT must be a port number/);
  });
});
