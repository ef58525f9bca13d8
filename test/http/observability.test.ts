import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call, startTestGateway } from '../support/gateway.ts';

describe('observability and API description', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { rateLimits: { chat: { perMinute: 3 }, keys: { perMinute: 1000 }, public: { perMinute: 1000 } } });
  });
  after(() => h.stop());

  const metricValue = (text: string, name: string, labels: Record<string, string> = {}) => {
    const line = text
      .split('\n')
      .find((l) => (l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) || l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  };

  test('/metrics counts requests, tokens, money, latency and rate-limit refusals', async () => {
    const { key } = await h.wallet(1_000_000);
    const client = h.client(key);
    await client.chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    const stream = await client.chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream: true });
    for await (const _ of stream) void _;
    await client.chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] });
    await assert.rejects(client.chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }), /429/);

    const res = await fetch(`${h.gw.metricsUrl}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /text\/plain/);
    const text = await res.text();
    assert.equal(metricValue(text, 'tollgate_http_requests_total', { route: '/v1/chat/completions', status: '200' }), 3);
    assert.equal(metricValue(text, 'tollgate_http_requests_total', { route: '/v1/chat/completions', status: '429' }), 1);
    assert.equal(metricValue(text, 'tollgate_rate_limited_total', { scope: 'chat' }), 1);
    const charged = await h.gw.services.storage.db
      .selectFrom('request_usage')
      .select((eb) => eb.fn.sum<number>('charged_usdc').as('n'))
      .executeTakeFirstOrThrow();
    assert.equal(metricValue(text, 'tollgate_charged_usdc_total', { model: 'fake/chat-small' }), Number(charged.n));
    assert.ok(metricValue(text, 'tollgate_tokens_total', { model: 'fake/chat-small', kind: 'completion' })! > 0);
    assert.equal(metricValue(text, 'tollgate_chat_duration_seconds_count', { model: 'fake/chat-small', stream: 'true' }), 1);
    assert.equal(metricValue(text, 'tollgate_chat_duration_seconds_count', { model: 'fake/chat-small', stream: 'false' }), 2);
    assert.equal(metricValue(text, 'tollgate_time_to_first_token_seconds_count', { provider: 'fake' }), 1);
    assert.equal(metricValue(text, 'tollgate_upstream_response_seconds_count', { provider: 'fake' }), 3);
    assert.equal(metricValue(text, 'tollgate_reservations_in_flight'), 0);
    assert.equal(metricValue(text, 'tollgate_locked_usdc'), 0);
    assert.equal(metricValue(text, 'tollgate_reconciler_backlog'), 0);
    // The route pattern is the label, never the wallet in the URL.
    assert.ok(!text.includes('0x'), 'an address leaked into a label');
    await h.gw.assertLedger();
  });

  test('every route the server registers is in /openapi.json', async () => {
    const res = await call(h.gw.url, 'GET', '/openapi.json');
    assert.equal(res.status, 200);
    assert.equal(res.body.openapi, '3.1.0');
    const paths = res.body.paths as Record<string, Record<string, unknown>>;
    const routes = h.gw.app.registeredRoutes;
    assert.ok(routes.length >= 12);
    for (const r of routes) {
      // A trailing wildcard (a model id may hold a slash) is documented as the {model} parameter.
      const path = r.url.replace(/:([a-z_]+)/g, '{$1}').replace(/\/\*$/, '/{model}');
      assert.ok(paths[path]?.[r.method.toLowerCase()], `${r.method} ${r.url} is not described`);
    }
    // Each documented error points at the common error shape.
    const chat = paths['/v1/chat/completions']!.post as { responses: Record<string, { content: Record<string, { schema: { $ref?: string } }> }> };
    assert.equal(chat.responses['402']!.content['application/json']!.schema.$ref, '#/components/schemas/Error');
    assert.deepEqual(res.body.components.schemas.Error.required, ['error', 'message']);
  });

  test("/llms.txt is a short plain-text guide with this gateway's URLs", async () => {
    const res = await fetch(`${h.gw.url}/llms.txt`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/plain/);
    const text = await res.text();
    for (const part of [
      'http://gateway.test/v1/topup',
      'http://gateway.test/v1/auth/keys',
      'http://gateway.test/v1/chat/completions',
      'PAYMENT-SIGNATURE',
      'SIWE',
    ]) {
      assert.ok(text.includes(part), part);
    }
    assert.ok(text.length < 4000);
  });
});

describe('metrics placement', () => {
  test('metrics can be switched off', async () => {
    const gw = await startTestGateway({ engine: 'sqlite', config: { metrics: { enabled: false } } });
    try {
      assert.equal((await call(gw.url, 'GET', '/metrics')).status, 404);
      assert.equal(gw.metricsUrl, null);
    } finally {
      await gw.stop();
    }
  });

  test('metrics are on their own loopback port by default', async () => {
    const gw = await startTestGateway({ engine: 'sqlite' });
    try {
      assert.equal((await call(gw.url, 'GET', '/metrics')).status, 404);
      assert.ok(gw.metricsUrl?.startsWith('http://127.0.0.1:'));
      const res = await fetch(`${gw.metricsUrl}/metrics`);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /tollgate_http_requests_total/);
    } finally {
      await gw.stop();
    }
  });
});
