import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import Fastify from 'fastify';
import { INBOUND_TRANSLATORS } from '../../src/protocols/index.ts';
import { openAIChatInbound } from '../../src/protocols/openai-chat/inbound.ts';
import type { ChatPlan } from '../../src/metered/plan/plan.ts';
import { errorHandler } from '../../src/http/errors.ts';
import { ApiError } from '../../src/refusal.ts';
import { startTestGateway, type TestGateway } from '../support/gateway.ts';

const plan = (clientWantsUsage: boolean) => ({ clientWantsUsage }) as ChatPlan;

describe('inbound codecs', () => {
  test('the OpenAI codec is the identity: the request and the answer text pass through untouched', () => {
    const body = { model: 'm', messages: [] };
    assert.equal(openAIChatInbound.decodeRequest(body), body);
    const answer = '{"id":"x",  "choices":[]}';
    assert.equal(openAIChatInbound.encodeAnswer(answer, JSON.parse(answer)), answer);
  });

  test('the OpenAI stream: chunks as data events, the usage-only chunk held until the end and only when asked for, with the charge, the failure event, [DONE]', () => {
    const asked = openAIChatInbound.streamEncoder(plan(true));
    const notAsked = openAIChatInbound.streamEncoder(plan(false));
    assert.equal(asked.chunk('{"a":1}', false), 'data: {"a":1}\n\n');
    assert.equal(asked.chunk('{"choices":[],"usage":{}}', true), '');
    assert.equal(
      asked.end(undefined, undefined, { usdc: 1500, deferred: false }),
      'data: {"choices":[],"usage":{"cost":0.0015,"charged_usdc":1500}}\n\ndata: [DONE]\n\n',
    );
    assert.equal(notAsked.chunk('{"choices":[],"usage":{}}', true), '');
    assert.equal(notAsked.end(undefined, undefined, { usdc: 1500, deferred: false }), 'data: [DONE]\n\n');
    assert.equal(
      notAsked.failure('it broke; nothing was charged'),
      'data: {"error":{"message":"it broke; nothing was charged","type":"upstream_error"}}\n\ndata: [DONE]\n\n',
    );
  });

  test("a route that names its codec writes its errors in the codec's shape, whatever errors.format says", async () => {
    const app = Fastify();
    app.setErrorHandler(errorHandler('openai'));
    const inboundCodec = {
      ...openAIChatInbound,
      path: '/v1/own',
      openaiCompatible: false,
      errorBody: (e: { code: string; message: string }) => ({ type: 'error', error: { type: e.code, message: e.message } }),
    };
    app.post('/v1/own', { config: { inboundCodec } }, async () => {
      throw new ApiError(402, 'INSUFFICIENT_BALANCE', 'top up');
    });
    const res = await app.inject({ method: 'POST', url: '/v1/own' });
    await app.close();
    assert.equal(res.statusCode, 402);
    assert.deepEqual(res.json(), { type: 'error', error: { type: 'INSUFFICIENT_BALANCE', message: 'top up' } });
  });

  describe('registration', () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({ engine: 'sqlite' });
    });
    after(() => gw.stop());

    test('every registered codec has its own path and the gateway serves it (authenticated, not 404)', async () => {
      const paths = INBOUND_TRANSLATORS.map((c) => c.path);
      assert.equal(new Set(paths).size, paths.length);
      for (const path of paths) {
        const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        assert.equal(res.status, 401, path);
      }
    });
  });

  test('domain code (chat, providers, top-up) imports neither Fastify nor the web layer', () => {
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        // The facilitator is a server of its own (tollgate facilitator), not the gateway's domain.
        else if (path.endsWith('.ts') && !path.endsWith('facilitator-server.ts')) {
          const text = readFileSync(path, 'utf8');
          if (/from '(fastify|[./]*\/http\/[^']*)'/.test(text)) offenders.push(path);
        }
      }
    };
    for (const dir of ['src/metered', 'src/providers', 'src/payments']) walk(dir);
    assert.deepEqual(offenders, []);
  });
});
