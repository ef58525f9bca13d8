import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { ConfigError, parseConfig } from '../../src/config/load.ts';
import { call, startTestGateway } from '../support/gateway.ts';

// Trusting every proxy (`trustProxy: true`) behind the shipped nginx, which appends to
// X-Forwarded-For, takes the client-written left-most entry as the client address, and every
// per-IP limit can be dodged by writing a new one each time.

const shipped = parseYaml(readFileSync('deploy/tollgate.production.yaml', 'utf8')) as { server: { trustProxy: unknown } };
const nginx = readFileSync('deploy/nginx/tollgate.conf', 'utf8');

describe('proxy trust', () => {
  test('server.trustProxy takes false, true, a hop count, or addresses and CIDRs', () => {
    const trust = (v: unknown) => parseConfig({ server: { trustProxy: v } }).server.trustProxy;
    assert.equal(trust(false), false);
    assert.equal(trust(true), true);
    assert.equal(trust(1), 1);
    assert.deepEqual(trust('127.0.0.1, 10.0.0.0/8'), ['127.0.0.1', '10.0.0.0/8']);
    assert.deepEqual(trust(['loopback', '::1', 'fd00::/8']), ['loopback', '::1', 'fd00::/8']);
    for (const bad of ['nginx', '10.0.0.0/33', ['127.0.0.1', 'x'], -1, 1.5, []]) {
      assert.throws(
        () => trust(bad),
        (err: Error) => err instanceof ConfigError && /server\.trustProxy/.test(err.message),
        JSON.stringify(bad),
      );
    }
  });

  test('the shipped nginx appends the peer address, and the shipped config trusts only that one local hop', () => {
    assert.match(nginx, /proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;/);
    assert.match(nginx, /server 127\.0\.0\.1:\d+/);
    assert.notEqual(shipped.server.trustProxy, true);
    assert.deepEqual(parseConfig({ server: { trustProxy: shipped.server.trustProxy } }).server.trustProxy, ['127.0.0.1', '::1']);
  });

  test('a spoofed X-Forwarded-For does not change the address the per-IP limit counts', async () => {
    // The test client connects from 127.0.0.1, so it plays nginx: it sends what nginx would forward
    // for a client at 203.0.113.7 that wrote its own X-Forwarded-For header.
    const gw = await startTestGateway({
      engine: 'sqlite',
      config: { server: { trustProxy: shipped.server.trustProxy }, rateLimits: { public: { perMinute: 3 } } },
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await call(gw.url, 'GET', '/v1/models', undefined, { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.7` });
        statuses.push(res.status);
      }
      assert.deepEqual(statuses, [200, 200, 200, 429, 429]);
      // Another real client behind the same proxy has its own budget.
      assert.equal((await call(gw.url, 'GET', '/v1/models', undefined, { 'x-forwarded-for': '203.0.113.8' })).status, 200);
      assert.match(gw.logs(), /"remoteAddress":"203\.0\.113\.7"/);
    } finally {
      await gw.stop();
    }
  });
});
