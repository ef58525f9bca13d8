import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { countTokens } from 'gpt-tokenizer';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createDurableSettler } from '../../src/ledger/spool/durable-settle.ts';
import { SettleSpool } from '../../src/ledger/spool/spool-file.ts';
import type { Engine, Storage } from '../../src/storage/database.ts';
import { ENGINES } from '../support/engines.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { rawRequest } from '../support/raw-http.ts';

/**
 * Attacks on the chat money path from the key holder's side: billable input smuggled in fields
 * and framings other than `messages[].content` strings, each of which must be reserved for.
 *
 * Prices (chat harness): 1.2 micro-USDC a prompt token, 2.4 a completion token. A wallet of
 * 5,000 micro-USDC covers a tiny request with max_tokens 16 (a few hundred micro-USDC), and cannot
 * cover any request carrying ~100 KB (or 20,000 NUL characters) of input, whichever field holds it.
 */
const FUNDS = 5_000;
const BULK = 100_000;
const hi = { role: 'user', content: 'hi' };

/** Requests that each smuggle ~100 KB of billable input outside `messages[].content` strings. */
const BULKY: Record<string, Record<string, unknown>> = {
  'messages[].name': { messages: [{ ...hi, name: 'n'.repeat(BULK) }] },
  'tool_calls in an assistant message': {
    messages: [
      hi,
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: 'a'.repeat(BULK) } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'ok' },
    ],
  },
  'a tool_choice object': { messages: [hi], tool_choice: { type: 'function', function: { name: 'f'.repeat(BULK) } } },
  'a stop array': { messages: [hi], stop: Array.from({ length: 4 }, () => 's'.repeat(BULK / 4)) },
  logit_bias: { messages: [hi], logit_bias: Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [String(100_000 + i), 1])) },
  metadata: { messages: [hi], metadata: { k: 'v'.repeat(BULK) } },
  user: { messages: [hi], user: 'u'.repeat(BULK) },
  // 20,000 characters a provider may bill as 20,000 tokens; each is 1 byte raw, 6 bytes as JSON's \u0000.
  'NUL characters sent as \\u0000 escapes': { messages: [{ role: 'user', content: '\u0000'.repeat(20_000) }] },
  'a text part with extra keys': {
    messages: [{ role: 'user', content: [{ type: 'text', text: 'hi', image_url: { url: `data:image/png;base64,${'A'.repeat(BULK)}` } }] }],
  },
  'many empty text parts': { messages: [{ role: 'user', content: Array.from({ length: 5_000 }, () => ({ type: 'text', text: '' })) }] },
};

/** A chat harness on `engine` for the tests of one describe block, its ledger checked after each test. */
function harnessPerSuite(engine: Engine): () => ChatHarness {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness(engine);
  });
  afterEach(async () => {
    h.fake.behaviour = {};
    await h.gw.assertLedger();
  });
  after(() => h.stop());
  return () => h;
}

const postChat = (h: ChatHarness, key: string, body: string) =>
  fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });

for (const engine of ENGINES) {
  describe(`attack: input outside the message text stays inside the reservation (${engine})`, () => {
    const harness = harnessPerSuite(engine);

    const post = (key: string, body: string) => postChat(harness(), key, body);

    test('each field carrying bulk is reserved in full: 402 before the provider is called, while a tiny request from the same wallet is served', async () => {
      const h = harness();
      const w = await h.wallet(FUNDS);
      const tiny = await post(w.key, JSON.stringify({ model: 'fake/chat-small', messages: [hi], max_tokens: 16 }));
      assert.equal(tiny.status, 200, 'the wallet can pay for a tiny request');
      await tiny.arrayBuffer();
      for (const [field, extra] of Object.entries(BULKY)) {
        const calls = h.fake.received.length;
        const res = await post(w.key, JSON.stringify({ model: 'fake/chat-small', max_tokens: 16, ...extra }));
        const body = await res.json();
        assert.equal(res.status, 402, `${field}: ${JSON.stringify(body).slice(0, 200)}`);
        assert.equal(body.error, 'INSUFFICIENT_BALANCE');
        assert.equal(h.fake.received.length, calls, `${field}: the provider was not called`);
      }
      const balance = await h.balance(w.account);
      assert.equal(balance.locked_usdc, 0, 'nothing left locked');
    });

    test('duplicate keys: the value reserved is the value forwarded (the last one), so a small first max_tokens does not buy a large second one', async () => {
      const h = harness();
      const w = await h.wallet(FUNDS);
      const calls = h.fake.received.length;
      // 4096 completion tokens cost 9,831 micro-USDC, more than the wallet has; 16 would fit.
      const res = await post(w.key, '{"model":"fake/chat-small","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"max_tokens":4096}');
      assert.equal(res.status, 402);
      assert.equal(h.fake.received.length, calls);
    });

    test('numbers with huge exponents are refused, not forwarded as Infinity or null', async () => {
      const h = harness();
      const w = await h.wallet(FUNDS);
      const calls = h.fake.received.length;
      for (const field of ['max_tokens', 'n', 'max_completion_tokens']) {
        const res = await post(w.key, `{"model":"fake/chat-small","messages":[{"role":"user","content":"hi"}],"${field}":1e400}`);
        assert.equal(res.status, 400, field);
      }
      assert.equal(h.fake.received.length, calls);
    });
  });
}

/** Waits for a final (non-1xx) status line on `client`, or null after `ms`. */
async function finalStatus(client: Awaited<ReturnType<typeof rawRequest>>, ms = 10_000): Promise<string | null> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const m = /HTTP\/1\.1 [2-5]\d\d[^\r]*/.exec(client.received());
    if (m) return m[0];
    if (client.isClosed()) return null;
    await new Promise((r) => setTimeout(r, 20));
  }
  return null;
}

describe('attack: the key is checked before the body, whatever the framing', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite');
  });
  after(() => h.stop());

  const head = (headers: string[]) =>
    ['POST /v1/chat/completions HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json', ...headers].join('\r\n') + '\r\n\r\n';

  test('a chunked body, and a 10 MiB body announced with Expect: 100-continue, get their 401 before any body byte', async () => {
    for (const framing of [['Transfer-Encoding: chunked'], [`Content-Length: ${10 * 1024 * 1024}`, 'Expect: 100-continue']]) {
      const client = await rawRequest(h.gw.url, head([...framing, 'Authorization: Bearer sk-nope']));
      const status = await finalStatus(client);
      client.socket.destroy();
      assert.match(status ?? 'no answer while the body was unsent', /^HTTP\/1\.1 401/, framing.join(', '));
    }
  });

  test('content-type variants never reach a parser without the bounds scan', async () => {
    const w = await h.wallet(1_000_000);
    const deep = `{"model":"fake/chat-small","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"x":${'['.repeat(70)}${']'.repeat(70)}}`;
    for (const type of [
      'Application/JSON',
      'application/json ; charset=utf-8',
      'application/json;charset=latin1',
      'application/json\t',
      'APPLICATION/JSON; foo=bar',
      'application/jsonx',
      'application/x-json',
      'text/json',
      'application/vnd.api+json',
      'text/plain',
    ]) {
      const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': type },
        body: deep,
      });
      const body = await res.json();
      const refusedByScan = res.status === 400 && /nested deeper/.test(body.message);
      assert.ok(refusedByScan || res.status === 415, `${JSON.stringify(type)}: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
    }
  });

  test('pipelined requests are each authenticated: a paid request does not carry the next one past the key check', async () => {
    const w = await h.wallet(1_000_000);
    const body = JSON.stringify({ model: 'fake/chat-small', messages: [hi], max_tokens: 16 });
    const calls = h.fake.received.length;
    const first = head([`Content-Length: ${Buffer.byteLength(body)}`, `Authorization: Bearer ${w.key}`]) + body;
    const second = head([`Content-Length: ${Buffer.byteLength(body)}`, 'Authorization: Bearer sk-nope']) + body;
    const third = head([`Content-Length: ${Buffer.byteLength(body)}`]) + body;
    const client = await rawRequest(h.gw.url, first + second + third);
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && (client.received().match(/HTTP\/1\.1 \d{3}/g) ?? []).length < 3 && !client.isClosed()) {
      await new Promise((r) => setTimeout(r, 20));
    }
    client.socket.destroy();
    const statuses = (client.received().match(/HTTP\/1\.1 \d{3}/g) ?? []).map((s) => s.slice(9));
    assert.equal(statuses[0], '200', client.received().slice(0, 300));
    assert.ok(statuses.length >= 2, `the second request was answered: ${statuses.join(', ')}`);
    assert.ok(
      statuses.slice(1).every((s) => s === '401'),
      `later requests: ${statuses.slice(1).join(', ')}`,
    );
    assert.equal(h.fake.received.length, calls + 1, 'only the authenticated request reached the provider');
    await h.gw.assertLedger();
  });
});

/**
 * A settle whose commit reached the database but whose answer was lost (PostgreSQL's connection
 * dropped after the COMMIT: "Connection terminated unexpectedly"). The settler retries it as an
 * outage; the retry finds the reservation already finished. The wallet has been charged, so the
 * answer it paid for must be delivered, not withheld with "nothing was charged".
 */
function commitsThenLosesTheAnswer(storage: Storage): Storage & { lost: number } {
  const wrapped = { ...storage, lost: 0, armed: true } as Storage & { lost: number; armed: boolean };
  const lose = <T>(result: T): T => {
    if (!wrapped.armed) return result;
    wrapped.armed = false;
    wrapped.lost++;
    throw new Error('Connection terminated unexpectedly');
  };
  // SQLite finishes in a write unit; PostgreSQL in one statement through db.executeQuery.
  wrapped.writeUnit = (async (fn: any) => lose(await storage.writeUnit(fn))) as Storage['writeUnit'];
  wrapped.db = new Proxy(storage.db, {
    get(target, prop) {
      if (prop === 'executeQuery') return async (q: any) => lose(await target.executeQuery(q));
      const v = Reflect.get(target, prop);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return wrapped;
}

for (const engine of ENGINES) {
  describe(`attack: a settle committed but not acknowledged (${engine})`, () => {
    let h: ChatHarness;
    let spoolDir: string;
    before(async () => {
      h = await startChatHarness(engine);
      spoolDir = mkdtempSync(join(tmpdir(), 'review-chat-spool-'));
    });
    after(async () => {
      await h.stop();
      rmSync(spoolDir, { recursive: true, force: true });
    });

    test('the answer is delivered and charged once, not withheld as "nothing was charged"', async () => {
      const s = h.gw.services;
      const storage = commitsThenLosesTheAnswer(s.storage);
      const original = s.settler;
      s.settler = createDurableSettler({
        storage,
        spool: SettleSpool.open(spoolDir, 'review'),
        logger: s.logger,
        failure: () => null,
        onApplied: () => undefined,
        onUnbilled: () => undefined,
      });
      try {
        const w = await h.wallet(1_000_000);
        h.fake.behaviour = { usage: { prompt_tokens: 100, completion_tokens: 50 } };
        const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'fake/chat-small', messages: [hi], max_tokens: 16 }),
        });
        const body = await res.json();
        assert.equal(storage.lost, 1, 'the first settle committed and its answer was lost');
        const balance = await h.balance(w.account);
        assert.equal(balance.balance_usdc, 1_000_000 - 240, 'charged once: 100 × 1.2 + 50 × 2.4');
        assert.equal(balance.locked_usdc, 0);
        assert.equal(res.status, 200, `the client paid for this answer: ${JSON.stringify(body).slice(0, 300)}`);
        assert.equal(res.headers.get('x-tollgate-charged-usdc'), '240');
        await h.gw.assertLedger();
      } finally {
        s.settler = original;
        h.fake.behaviour = {};
      }
    });
  });
}

/**
 * Reasoning models on DeepSeek or vLLM stream their thinking as `reasoning_content` and bill it as
 * completion tokens. When the provider reports no usage (or a drain or a shutdown cuts the stream),
 * the gateway counts the tokens of what was produced; it counted only `content` and tool calls, so
 * the reasoning it had delivered (often most of the answer) was free.
 */
for (const engine of ENGINES) {
  describe(`attack: delivered reasoning is billed when the provider reports no usage (${engine})`, () => {
    const harness = harnessPerSuite(engine);

    const REASONING = 'Let me think about the question step by step before I answer it. '.repeat(40);

    test('a stream whose JSON has spaces ("usage": {) is billed from the provider\'s usage, not an estimate', async () => {
      const h = harness();
      const w = await h.wallet(1_000_000);
      h.fake.behaviour = { spacedJson: true, usage: { prompt_tokens: 100, completion_tokens: 50 } };
      const res = await postChat(h, w.key, JSON.stringify({ model: 'fake/chat-small', messages: [hi], max_tokens: 4096, stream: true }));
      const text = await res.text();
      assert.ok(text.includes('"usage": null'), 'the provider wrote spaced JSON');
      assert.ok(!text.includes('"prompt_tokens"'), 'the usage chunk is not sent to a client that did not ask for it');
      const rows = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).execute();
      assert.equal(rows.length, 1);
      assert.deepEqual(
        [Number(rows[0]!.estimated), Number(rows[0]!.prompt_tokens), Number(rows[0]!.completion_tokens), Number(rows[0]!.charged_usdc)],
        [0, 100, 50, 240],
      );
    });

    for (const stream of [false, true]) {
      test(`${stream ? 'streamed' : 'plain'}: the estimate counts the reasoning_content the client received`, async () => {
        const h = harness();
        const w = await h.wallet(1_000_000);
        h.fake.behaviour = { omitUsage: true, reasoning: REASONING, content: 'Yes.' };
        const res = await postChat(h, w.key, JSON.stringify({ model: 'fake/chat-small', messages: [hi], max_tokens: 4096, stream }));
        const text = await res.text();
        assert.equal(res.status, 200);
        assert.ok(text.includes('"reasoning_content"'), 'the reasoning reached the client');
        const rows = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('api_key_id', '=', w.keyId).execute();
        assert.equal(rows.length, 1);
        assert.equal(Number(rows[0]!.estimated), 1);
        const reasoningTokens = countTokens(REASONING);
        assert.ok(
          Number(rows[0]!.completion_tokens) >= reasoningTokens,
          `billed ${rows[0]!.completion_tokens} completion tokens for ${reasoningTokens} tokens of delivered reasoning`,
        );
      });
    }
  });
}

/**
 * Failed authentications are limited per client address. An IPv6 client owns a whole /64 (its
 * provider routes 2^64 addresses to it), so counting each address separately gave it an unlimited
 * budget of junk keys and SIWE proofs: one new address per attempt.
 */
describe('attack: the auth failure limit counts an IPv6 client by its /64', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { server: { trustProxy: ['127.0.0.1', '::1'] }, rateLimits: { authFailures: { perMinute: 3 } } });
  });
  after(() => h.stop());

  test('bad keys from four addresses of one /64 are refused with 429; another /64 and IPv4 clients are not affected', async () => {
    const attempt = (from: string) =>
      fetch(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: 'Bearer sk-nope', 'content-type': 'application/json', 'x-forwarded-for': from },
        body: '{}',
      }).then(async (r) => (await r.arrayBuffer(), r.status));
    const statuses = [];
    for (let i = 1; i <= 5; i++) statuses.push(await attempt(`2001:db8:1:2::${i.toString(16)}`));
    assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
    assert.equal(await attempt('2001:db8:1:3::1'), 401, 'another /64 has its own budget');
    assert.equal(await attempt('2001:0db8:0001:0002:ffff:0:0:9'), 429, 'the same /64 written out in full');
    assert.equal(await attempt('203.0.113.7'), 401, 'IPv4 clients are counted by address');
  });
});

/** The public per-address limits (models, usage, top-ups, key management) count the same buckets. */
describe('attack: the public per-address limit counts an IPv6 client by its /64', () => {
  let h: ChatHarness;
  before(async () => {
    h = await startChatHarness('sqlite', { server: { trustProxy: ['127.0.0.1', '::1'] }, rateLimits: { public: { perMinute: 2 } } });
  });
  after(() => h.stop());

  test('GET /v1/models from three addresses of one /64: the third is 429; another /64 is not affected', async () => {
    const list = (from: string) =>
      fetch(`${h.gw.url}/v1/models`, { headers: { 'x-forwarded-for': from } }).then(async (r) => (await r.arrayBuffer(), r.status));
    assert.deepEqual([await list('2001:db8:5:6::1'), await list('2001:db8:5:6::2'), await list('2001:db8:5:6::3')], [200, 200, 429]);
    assert.equal(await list('2001:db8:5:7::1'), 200, 'another /64 has its own budget');
  });
});
