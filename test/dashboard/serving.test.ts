import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { BUDGET_BYTES, OUT } from '../../scripts/build-dashboard.mjs';
import { ensureDashboardBuilt } from '../support/browser.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';

/** How the gateway serves the page: built ahead, no CDN, a strict CSP, and no demo wallet on a normal start. */
describe('the dashboard as served', () => {
  let gw: TestGateway;
  before(async () => {
    await ensureDashboardBuilt();
    gw = await startTestGateway({ engine: 'sqlite', config: { chains: { '8453': { rpcUrl: 'http://127.0.0.1:9', explorerUrl: 'https://basescan.org' } } } });
  });
  after(() => gw?.stop());

  test('/ is the page, with a strict Content-Security-Policy and no inline script', async () => {
    const res = await fetch(`${gw.url}/`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/html/);
    const csp = res.headers.get('content-security-policy')!;
    for (const rule of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"])
      assert.ok(csp.includes(rule), rule);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    const html = await res.text();
    const scripts = [...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/g)];
    assert.equal(scripts.length, 1);
    assert.match(scripts[0]![0], /src="\/dashboard\/app\.js"/);
    assert.equal(scripts[0]![1], '', 'no inline script');
  });

  test('assets come from this gateway only, revalidate with an ETag, and nothing outside the bundle is served', async () => {
    const js = await fetch(`${gw.url}/dashboard/app.js`);
    assert.equal(js.status, 200);
    assert.match(js.headers.get('content-type')!, /^text\/javascript/);
    const etag = js.headers.get('etag')!;
    assert.equal((await fetch(`${gw.url}/dashboard/app.js`, { headers: { 'if-none-match': etag } })).status, 304);
    const css = await (await fetch(`${gw.url}/dashboard/app.css`)).text();
    assert.doesNotMatch(css, /@import|url\(\s*['"]?https?:/, 'no stylesheet or font from another origin');
    for (const path of ['/dashboard/index.html', '/dashboard/nope.js', '/dashboard/..%2Fpackage.json', '/dashboard/%2e%2e%2f%2e%2e%2fpackage.json']) {
      const res = await call(gw.url, 'GET', path);
      assert.equal(res.status, 404, path);
      assert.equal(res.body.error, 'NOT_FOUND');
    }
  });

  test('the bundle stays under 200 KB gzipped', () => {
    const total = readdirSync(OUT).reduce((sum, name) => sum + gzipSync(readFileSync(join(OUT, name)), { level: 9 }).length, 0);
    assert.ok(total < BUDGET_BYTES, `${total} bytes gzipped`);
  });

  test('the page configuration names the chains and their explorers and, on a normal start, no demo wallet', async () => {
    const res = await call(gw.url, 'GET', '/v1/dashboard/config');
    assert.equal(res.status, 200);
    assert.equal(res.body.demo_wallet, null);
    assert.deepEqual(res.body.chains, [{ id: 8453, name: 'Base', explorer_url: 'https://basescan.org' }]);
    assert.equal(res.body.session_minutes, 30);
    assert.ok(!JSON.stringify(res.body).includes('private'), 'no key of any kind');
  });

  test('dashboard.enabled: false serves no page', async () => {
    const off = await startTestGateway({ engine: 'sqlite', config: { dashboard: { enabled: false } } });
    try {
      for (const path of ['/', '/dashboard/app.js', '/v1/dashboard/config']) assert.equal((await call(off.url, 'GET', path)).status, 404, path);
      // The API is unaffected.
      assert.equal((await call(off.url, 'GET', '/v1/models')).status, 200);
    } finally {
      await off.stop();
    }
  });
});
