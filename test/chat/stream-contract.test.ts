import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import { expectNothingCharged, usageRowsOf, waitForUsageRow } from '../support/usage-rows.ts';
import { routingSuite, type RoutingHarness } from '../support/routing-harness.ts';
import { readServed, sseBlocks, streamedDeployment } from '../support/sse.ts';

const FUNDS = 1_000_000;
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
/** How long the slow provider waits before its first byte: the window in which the client must already have its headers. */
const FIRST_BYTE_DELAY_MS = 1000;

/** One streaming request of each inbound protocol, for `model`. */
interface Protocol {
  name: string;
  path: string;
  body(model: string): Record<string, unknown>;
}
const HI = [{ role: 'user', content: 'hi' }];
const CHAT: Protocol = {
  name: 'chat completions',
  path: '/v1/chat/completions',
  body: (model) => ({ model, messages: HI, stream: true, stream_options: { include_usage: true } }),
};
const RESPONSES: Protocol = { name: 'Responses', path: '/v1/responses', body: (model) => ({ model, input: 'hi', stream: true }) };
const MESSAGES: Protocol = { name: 'Messages', path: '/v1/messages', body: (model) => ({ model, max_tokens: 100, messages: HI, stream: true }) };

const ask = (h: RoutingHarness, key: string, p: Protocol, model: string, signal?: AbortSignal) =>
  fetch(`${h.gw.url}${p.path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(p.body(model)),
    signal,
  });

/** A Responses or Messages stream's events: `event:` name and parsed `data:`, comments skipped as a conforming parser does. */
const namedEvents = (text: string) =>
  sseBlocks(text).map((block) => {
    const [eventLine, dataLine] = block.split('\n');
    return { event: eventLine!.replace(/^event: /, ''), data: JSON.parse(dataLine!.replace(/^data: /, '')) };
  });

/** The request was billed once: one usage row, `ok`, and the wallet down by exactly its charge. */
async function chargedOnce(h: RoutingHarness, w: { account: any; keyId: number }, deployment: string) {
  const row = await waitForUsageRow(h, w.keyId);
  assert.equal((await usageRowsOf(h, w.keyId)).length, 1);
  assert.deepEqual([row.status, row.deployment], ['ok', deployment]);
  assert.ok(Number(row.charged_usdc) > 0);
  const left = FUNDS - Number(row.charged_usdc);
  assert.deepEqual(await h.balance(w.account), { balance_usdc: left, locked_usdc: 0, available_usdc: left });
}

for (const engine of ENGINES) {
  describe(`the spec's stream contract: headers before the upstream call, provider failures in the stream (${engine})`, () => {
    // A first-byte timeout well past the slow provider's delay: it answers, late.
    const harness = routingSuite(engine, USAGE, { chat: { firstByteTimeoutSeconds: 5 } });
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    /** Every provider waits FIRST_BYTE_DELAY_MS, then answers; `answered()` says whether any wrote its first event yet. */
    function slowProviders(): { answered: () => boolean } {
      let answered = false;
      const mark = (json: string) => {
        answered = true;
        return json;
      };
      h.fake.behaviour = { usage: USAGE, delayMs: FIRST_BYTE_DELAY_MS, rewriteChunk: mark };
      h.anthropic.behaviour = { delayMs: FIRST_BYTE_DELAY_MS, rewriteAnswer: mark };
      return { answered: () => answered };
    }

    const served = [
      { p: CHAT, model: 'fake/chat-small', deployment: 'fake/chat-small' },
      { p: RESPONSES, model: 'fake/chat-small', deployment: 'fake/chat-small' },
      { p: MESSAGES, model: 'fake/chat-small', deployment: 'fake/chat-small' },
      { p: MESSAGES, model: 'anth/claude-test', deployment: 'anth/claude-upstream' },
      // With fallbacks configured the headers still leave first: they commit to no deployment.
      { p: CHAT, model: 'fake/routed', deployment: 'fake/routed' },
      { p: RESPONSES, model: 'fake/routed', deployment: 'fake/routed' },
      { p: MESSAGES, model: 'fake/routed', deployment: 'fake/routed' },
    ];
    for (const { p, model, deployment } of served) {
      const title = `${p.name} (${model}): the 200 and the SSE headers arrive while the provider has not answered`;
      test(`${title}; then the answer streams, its deployment named in the stream, charged once`, async () => {
        const w = await h.wallet(FUNDS);
        const provider = slowProviders();
        const res = await ask(h, w.key, p, model);
        assert.equal(res.status, 200);
        assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
        assert.equal(provider.answered(), false, 'the client had its status and headers before the provider wrote a byte (spec 4.7 rule 3)');
        const text = await res.text();
        assert.ok(provider.answered());
        assert.equal(streamedDeployment(text), deployment);
        assert.equal(res.headers.get('x-tollgate-deployment'), null);
        await chargedOnce(h, w, deployment);
      });
    }

    test("Responses: response.created and response.in_progress go out before the provider answers, as OpenAI's own API sends them", async () => {
      const w = await h.wallet(FUNDS);
      const provider = slowProviders();
      const res = await ask(h, w.key, RESPONSES, 'fake/chat-small');
      const reader = res.body!.getReader();
      let first = '';
      while (!first.includes('response.in_progress')) first += new TextDecoder().decode((await reader.read()).value);
      assert.equal(provider.answered(), false);
      assert.deepEqual(
        namedEvents(first).map((e) => e.event),
        ['response.created', 'response.in_progress'],
      );
      while (!(await reader.read()).done);
      await chargedOnce(h, w, 'fake/chat-small');
    });

    test("chat completions: every deployment fails before answering: 200, the spec's error event, then [DONE]; nothing charged", async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 503 };
      h.backup.behaviour = { failStatus: 500 };
      const res = await ask(h, w.key, CHAT, 'fake/routed');
      assert.equal(res.status, 200);
      const { deployment, events } = await readServed(res);
      assert.equal(deployment, null, 'no deployment served');
      assert.deepEqual(events.slice(-1), ['[DONE]']);
      assert.deepEqual(Object.keys(JSON.parse(events.at(-2)!).error).sort(), ['message', 'type'], "the spec's shape: {error: {message, type}}");
      const error = JSON.parse(events.at(-2)!).error;
      assert.equal(error.type, 'upstream_error');
      assert.match(error.message, /^every deployment of fake\/routed failed \(2 attempts\); the last: the provider answered 500.*; nothing was charged$/);
      assert.deepEqual([h.fake.received.length, h.backup.received.length], [1, 1]);
      await expectNothingCharged(h, w, FUNDS);
    });

    test('Responses: every deployment fails: response.created, response.in_progress, error, response.failed; nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 503 };
      h.backup.behaviour = { failStatus: 500 };
      const res = await ask(h, w.key, RESPONSES, 'fake/routed');
      assert.equal(res.status, 200);
      const events = namedEvents(await res.text());
      assert.deepEqual(
        events.map((e) => e.event),
        ['response.created', 'response.in_progress', 'error', 'response.failed'],
      );
      assert.match(events[2]!.data.message, /^every deployment of fake\/routed failed \(2 attempts\).*nothing was charged$/);
      assert.equal(events[3]!.data.response.status, 'failed');
      await expectNothingCharged(h, w, FUNDS);
    });

    // A native Messages request is never sent to the OpenAI-compatible fallback: its one deployment fails.
    const failing = [
      { model: 'fake/routed', message: /^every deployment of fake\/routed failed \(2 attempts\).*nothing was charged$/ },
      { model: 'anth/claude-routed', message: /^the provider answered 529.*nothing was charged$/ },
    ];
    for (const { model, message } of failing) {
      test(`Messages (${model}): every deployment fails: Anthropic's error event, and nothing before it; nothing charged`, async () => {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { failStatus: 503 };
        h.backup.behaviour = { failStatus: 500 };
        h.anthropic.behaviour = { failStatus: 529 };
        const res = await ask(h, w.key, MESSAGES, model);
        assert.equal(res.status, 200);
        const events = namedEvents(await res.text());
        assert.deepEqual(
          events.map((e) => e.event),
          ['error'],
        );
        assert.equal(events[0]!.data.error.type, 'api_error');
        assert.match(events[0]!.data.error.message, message);
        await expectNothingCharged(h, w, FUNDS);
      });
    }

    test('Responses: the first deployment fails, the second serves: one response.created, the fallback named in the stream, charged once', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 503 };
      const res = await ask(h, w.key, RESPONSES, 'fake/routed');
      const text = await res.text();
      assert.equal(streamedDeployment(text), 'backup/routed-backup');
      const events = namedEvents(text).map((e) => e.event);
      assert.deepEqual([events.filter((e) => e === 'response.created').length, events.at(-1)], [1, 'response.completed']);
      await chargedOnce(h, w, 'backup/routed-backup');
    });

    const leaves = 'a client that leaves after the headers, before the provider answered';
    test(`${leaves}: no fallback is called, and what the provider then produces is drained and billed`, async () => {
      const w = await h.wallet(FUNDS);
      const provider = slowProviders();
      const abort = new AbortController();
      const res = await ask(h, w.key, CHAT, 'fake/routed', abort.signal);
      assert.equal(res.status, 200);
      assert.equal(provider.answered(), false);
      abort.abort();
      const row = await waitForUsageRow(h, w.keyId);
      assert.equal(row.status, 'client_disconnected');
      assert.ok(Number(row.charged_usdc) > 0, 'the provider produced the answer (it bills us for it): it is billed');
      assert.equal(h.backup.received.length, 0);
      assert.equal((await h.balance(w.account)).locked_usdc, 0);
    });

    test('a failure inside the gateway once the headers are out: the stream still ends with the error event and [DONE], nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      const routing = h.gw.services.chat.routing as { settings: () => unknown };
      const settings = routing.settings;
      routing.settings = () => {
        throw new Error('a fault inside the gateway');
      };
      try {
        const res = await ask(h, w.key, CHAT, 'fake/routed');
        assert.equal(res.status, 200);
        const events = (await readServed(res)).events;
        assert.equal(events.at(-1), '[DONE]');
        assert.match(JSON.parse(events.at(-2)!).error.message, /^the gateway failed while streaming \(request .+\); nothing was charged$/);
      } finally {
        routing.settings = settings;
      }
      assert.deepEqual(await h.balance(w.account), { balance_usdc: FUNDS, locked_usdc: 0, available_usdc: FUNDS });
      assert.match(h.gw.logs(), /a stream failed inside the gateway; it ends with the error event/);
    });
  });

  describe(`chat.streamErrorsAsStatus: true, the operator's opt-in for HTTP statuses on streams (${engine})`, () => {
    const harness = routingSuite(engine, USAGE, { chat: { firstByteTimeoutSeconds: 5, streamErrorsAsStatus: true } });
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    test("the headers wait for a deployment's 200 and name it; the stream names it too", async () => {
      const w = await h.wallet(FUNDS);
      let answered = false;
      h.fake.behaviour = { failStatus: 503 };
      h.backup.behaviour = { usage: USAGE, delayMs: 300, rewriteChunk: (json) => ((answered = true), json) };
      const res = await ask(h, w.key, CHAT, 'fake/routed');
      assert.equal(res.status, 200);
      assert.equal(answered, true, 'the headers left once the fallback answered');
      assert.equal(res.headers.get('x-tollgate-deployment'), 'backup/routed-backup');
      assert.equal(streamedDeployment(await res.text()), 'backup/routed-backup');
      await chargedOnce(h, w, 'backup/routed-backup');
    });

    for (const p of [CHAT, RESPONSES, MESSAGES]) {
      test(`${p.name}: every deployment fails: a 502 in the protocol's JSON shape, which the SDKs retry; nothing charged`, async () => {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { failStatus: 503 };
        h.backup.behaviour = { failStatus: 500 };
        const res = await ask(h, w.key, p, 'fake/routed');
        assert.equal(res.status, 502);
        assert.match(res.headers.get('content-type') ?? '', /application\/json/);
        assert.match(await res.text(), /every deployment of fake\/routed failed \(2 attempts\)/);
        await expectNothingCharged(h, w, FUNDS);
      });
    }
  });
}
