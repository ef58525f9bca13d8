import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { payPerRequestSuite } from '../../support/pay-per-request-harness.ts';

/**
 * A browser paying per request (or with a key) through the stock SDKs: the CORS preflight must
 * allow every header the SDK sends, or the browser never sends the request at all. openai-node and
 * @anthropic-ai/sdk (dangerouslyAllowBrowser) send their `x-stainless-*` platform headers on every
 * request, the Anthropic SDK `anthropic-version` and `anthropic-dangerous-direct-browser-access`
 * (and the key in `x-api-key`, the header /v1/messages documents), Claude Code style clients
 * `anthropic-beta`. The gateway's allow list named only content-type, authorization and the x402
 * headers, so every such request failed its preflight, paid or keyed.
 */
const ORIGIN = 'https://app.example';
/** Headers a browser sends without asking (CORS-safelisted) or that page script cannot set. */
const NOT_PREFLIGHTED = new Set(['accept', 'accept-language', 'content-language', 'user-agent', 'content-length']);

/** The header names `call` makes its SDK send, read off a fetch that answers nothing. */
async function sentHeaders(call: (fetch: typeof globalThis.fetch) => Promise<unknown>): Promise<string[]> {
  let names: string[] = [];
  const capture = async (_url: unknown, init?: RequestInit) => {
    names = [...new Headers(init?.headers).keys()];
    return new Response('{}', { status: 400, headers: { 'content-type': 'application/json' } });
  };
  await call(capture as typeof globalThis.fetch).catch(() => undefined);
  assert.ok(names.length > 0, 'the SDK sent nothing');
  return names.filter((n) => !NOT_PREFLIGHTED.has(n));
}

describe('pay-per-request × browsers: the preflight allows what the stock SDKs send (sqlite)', () => {
  const harness = payPerRequestSuite('sqlite');

  const preflight = async (path: string, headers: string[]) => {
    const res = await fetch(`${harness().gw.url}${path}`, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': headers.join(',') },
    });
    assert.equal(res.status, 204);
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    return headers.filter((h) => !allowed.includes('*') && !allowed.includes(h));
  };

  test('openai-node on /v1/chat/completions and /v1/responses, keyless with an x402 payment', async () => {
    const openai = (fetch: typeof globalThis.fetch) =>
      new OpenAI({
        baseURL: 'https://gateway.example/v1',
        apiKey: 'unused',
        fetch,
        maxRetries: 0,
        dangerouslyAllowBrowser: true,
        defaultHeaders: { Authorization: null },
      });
    const chat = await sentHeaders((f) => openai(f).chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }));
    const responses = await sentHeaders((f) => openai(f).responses.create({ model: 'fake/chat-small', input: 'hi' }));
    assert.deepEqual(await preflight('/v1/chat/completions', [...chat, 'payment-signature']), [], 'headers the browser may not send to chat completions');
    assert.deepEqual(await preflight('/v1/responses', [...responses, 'payment-signature']), [], 'headers the browser may not send to Responses');
  });

  test("@anthropic-ai/sdk on /v1/messages, with its key in x-api-key and Claude Code's anthropic-beta", async () => {
    const sent = await sentHeaders((fetch) =>
      new Anthropic({ baseURL: 'https://gateway.example', apiKey: 'sk-unused', fetch, maxRetries: 0, dangerouslyAllowBrowser: true }).messages.create({
        model: 'fake/chat-small',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
      }),
    );
    const names = [...new Set([...sent, 'x-api-key', 'anthropic-beta'])];
    assert.deepEqual(await preflight('/v1/messages', names), [], 'headers the browser may not send to Messages');
  });

  test('page script can read every header an answer carries beside its body (x-should-retry, x-tollgate-*)', async () => {
    const h = harness();
    const payer = await h.payer(1n);
    const body = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], max_tokens: 20 };
    const offer = (await h.chat(body)).body.accepts[0];
    const { v2Header } = await import('../../support/x402-payloads.ts');
    const header = v2Header(offer, await h.usdcPayment(payer, BigInt(offer.amount)));
    const answer = await h.chat(body, { origin: ORIGIN, 'payment-signature': header });
    assert.equal(answer.status, 200, answer.text);
    const exposed = (answer.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    const carried = [...answer.headers.keys()].filter((n) => n.startsWith('x-tollgate-') || n === 'x-should-retry' || n.startsWith('payment-'));
    assert.ok(carried.includes('x-tollgate-charged-usdc'), `the answer carried ${carried.join(', ')}`);
    assert.deepEqual(
      carried.filter((n) => !exposed.includes(n)),
      [],
      'headers page script cannot read',
    );
    // Every such header the gateway's code names, whichever answer carries it (refusals, fitted or
    // trimmed requests, stored responses, outages), but those it only reads or sends upstream.
    const named = new Set<string>();
    for (const file of readdirSync(new URL('../../../src/', import.meta.url), { recursive: true, encoding: 'utf8' })) {
      if (!file.endsWith('.ts')) continue;
      const text = readFileSync(new URL(`../../../src/${file}`, import.meta.url), 'utf8');
      for (const m of text.matchAll(/'(x-tollgate-[a-z-]+|x-should-retry)'/g)) named.add(m[1]!);
    }
    const notAnswered = new Set(['x-tollgate-fit-max-tokens', 'x-tollgate-request-id']);
    const answered = [...named].filter((n) => !notAnswered.has(n));
    assert.ok(answered.length >= 10, `found ${answered.join(', ')}`);
    assert.deepEqual(
      answered.filter((n) => !exposed.includes(n)),
      [],
      'response headers page script cannot read',
    );
    await h.gw.assertLedger();
  });
});
