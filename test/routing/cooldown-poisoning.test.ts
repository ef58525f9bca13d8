import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ENGINES } from '../support/engines.ts';
import { postChat, routingSuite, type RoutingHarness } from '../support/routing-harness.ts';
import { readServed } from '../support/sse.ts';

/**
 * A non-streaming answer's headers come only once the whole completion is generated, so a request
 * asking for many output tokens (max_tokens within the model's limit) is "a timeout before the first
 * byte" at any healthy deployment: the chain counts it as the DEPLOYMENT's failure (retry class),
 * toward its cooldown, and moves on. The request decides the failure, not the deployment's health.
 *
 * Here the harness's first-byte timeout is 1 s and the fakes generate 1000 tokens a second (scale:
 * the default 60 s timeout against a ~70 tokens/s model is the same ~4,200 tokens).
 */
const USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const MESSAGES = [{ role: 'user', content: 'write a very long essay' }];
/** Time to headers of a non-streaming answer: the whole generation, at 1000 tokens/s. */
const generates = (b: any) => (b.stream ? 0 : Number(b.max_tokens ?? 0));

describe('attack: one caller decides cooldowns and fans out free generations (sqlite)', () => {
  // The documented defaults (3 failures in 60 s cool a deployment for 30 s).
  const harness = routingSuite('sqlite', USAGE, { chat: { cooldown: { failures: 3, windowSeconds: 60, seconds: 30 } } });
  let h: RoutingHarness;
  beforeEach(() => (h = harness()));

  test('three long non-streaming requests from one wallet cool a healthy primary down for every other caller', async () => {
    const attacker = await h.wallet(10_000_000);
    const victim = await h.wallet(10_000_000);
    // The primary is healthy: it answers every request, a long one after its generation time.
    h.fake.behaviour = { usage: USAGE, delayMsFor: generates };
    // The fallback (another provider, faster or on a higher tier) serves the long ones in time.
    h.backup.behaviour = { usage: USAGE };
    for (let i = 0; i < 3; i++) {
      const res = await postChat(h, attacker.key, { model: 'fake/routed', messages: MESSAGES, max_tokens: 4000 });
      // The fallback serves the long request in time (and the attacker pays for it); the primary's
      // timeout moved the request on but is not counted against the primary (docs/DECISIONS.md, "Cooldowns").
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-deployment'), 'backup/routed-backup');
      await res.text();
    }
    // The primary generated each of those and was abandoned; the fallback served and was paid for.
    assert.equal(h.fake.received.length, 3);
    assert.equal(h.backup.received.length, 3);
    assert.deepEqual(h.gw.services.chat.routing.cooldown.cooling(), [], 'the primary is not cooling');
    assert.equal(h.gw.services.chat.routing.cooldown.recentFailures('fake/routed'), 0, 'nor counted toward a cooldown');

    const res = await postChat(h, victim.key, { model: 'fake/routed', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 });
    assert.equal(res.status, 200);
    await res.text();
    assert.equal(
      res.headers.get('x-tollgate-deployment'),
      'fake/routed',
      "another caller's short request, which the primary answers in 0.1 s, is sent to the fallback: one wallet's requests cooled the primary down for everyone (and can keep it so with 3 requests every 30 s)",
    );
  });
});

describe('attack: a request slower than the first-byte timeout fans out to every deployment, free (sqlite)', () => {
  const harness = routingSuite('sqlite', USAGE);
  let h: RoutingHarness;
  beforeEach(() => (h = harness()));

  test('one long non-streaming request is generated at most once per deployment (never retried on one), and the 502 says how to avoid it', async () => {
    const w = await h.wallet(10_000_000);
    h.fake.behaviour = { usage: USAGE, delayMsFor: generates };
    h.backup.behaviour = { usage: USAGE, delayMsFor: generates };
    const res = await postChat(h, w.key, { model: 'fake/routed', messages: MESSAGES, max_tokens: 4000 });
    assert.equal(res.status, 502);
    assert.equal(res.headers.get('x-should-retry'), 'false', 'the same request would time out again');
    assert.match(
      (await res.json()).message,
      /^every deployment of fake\/routed failed \(2 attempts\); the last: the provider timed out before answering \(.*set stream: true/,
    );
    assert.equal((await h.balance(w.account)).balance_usdc, 10_000_000, 'the caller paid nothing');
    // Moving on after a timeout is what the fallbacks exist for (a stuck provider); the bound is one
    // generation per deployment, never a retry of the same one (docs/DECISIONS.md, "When to move on").
    const generations = h.fake.received.length + h.backup.received.length;
    assert.deepEqual([h.fake.received.length, h.backup.received.length], [1, 1], 'each deployment asked once, none twice');
    assert.ok(
      generations <= 2,
      `the providers were made to generate ${generations} completions of up to 4000 tokens (each billed to the operator) for one request that paid nothing (with the defaults, 60 s first-byte timeout and 120 s attempt deadline, up to 3 minute-long generations per request, before any cooldown kicks in)`,
    );
  });
});

describe("attack: the client SDK's own retries multiply the unpaid generations (sqlite)", () => {
  const harness = routingSuite('sqlite', USAGE);
  let h: RoutingHarness;
  beforeEach(() => (h = harness()));

  test('the openai SDK with its defaults (2 retries of a 502) does not resend a long non-streaming request that timed out everywhere: x-should-retry: false', async () => {
    const w = await h.wallet(10_000_000);
    h.fake.behaviour = { usage: USAGE, delayMsFor: generates };
    h.backup.behaviour = { usage: USAGE, delayMsFor: generates };
    const client = new OpenAI({ apiKey: w.key, baseURL: `${h.gw.url}/v1` });
    await assert.rejects(
      client.chat.completions.create({ model: 'fake/routed', messages: MESSAGES as any, max_tokens: 4000 }),
      (err: any) => err.status === 502,
    );
    assert.deepEqual(
      [h.fake.received.length, h.backup.received.length],
      [1, 1],
      'one generation per deployment, the SDK does not resend (before: 3 SDK tries × 2 deployments)',
    );
    assert.equal((await h.balance(w.account)).balance_usdc, 10_000_000);
  });
});

describe('attack: once one caller cooled the primary, a blip at the fallback is a 502 for everyone (sqlite)', () => {
  const harness = routingSuite('sqlite', USAGE, { chat: { cooldown: { failures: 3, windowSeconds: 60, seconds: 30 } } });
  let h: RoutingHarness;
  beforeEach(() => (h = harness()));

  test('the healthy (but cooling) primary is not tried when the only ready deployment fails', async () => {
    const attacker = await h.wallet(10_000_000);
    const victim = await h.wallet(10_000_000);
    h.fake.behaviour = { usage: USAGE, delayMsFor: generates };
    h.backup.behaviour = { usage: USAGE };
    for (let i = 0; i < 3; i++) await (await postChat(h, attacker.key, { model: 'fake/routed', messages: MESSAGES, max_tokens: 4000 })).text();
    // The fallback has one bad moment (a 503, which the primary would have absorbed as the fallback did before).
    h.backup.behaviour = { failStatus: 503 };
    const res = await postChat(h, victim.key, { model: 'fake/routed', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 });
    const text = await res.text();
    assert.equal(
      res.status,
      200,
      `the victim got ${res.status} (${text.slice(0, 200)}); the primary, healthy for this request, was never tried (${h.fake.received.length - 3} calls)`,
    );
  });
});

for (const engine of ENGINES)
  describe(`attack: a cooling deployment is a last resort, not a refusal (${engine})`, () => {
    const harness = routingSuite(engine, USAGE, { chat: { cooldown: { failures: 3, windowSeconds: 60, seconds: 30 } } });
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    /** Three 503s from the primary (each served by the fallback) cool it down: a real, unambiguous failure. */
    async function coolThePrimary(key: string) {
      h.fake.behaviour = { failStatus: 503 };
      for (let i = 0; i < 3; i++) assert.equal((await postChat(h, key, { model: 'fake/routed', messages: MESSAGES })).status, 200);
      assert.deepEqual(
        h.gw.services.chat.routing.cooldown.cooling().map((c) => c.deployment),
        ['fake/routed'],
      );
      h.fake.received.length = 0;
      h.backup.received.length = 0;
    }

    test('the primary recovered while cooling: a 503 at the fallback is served by the primary, tried last', async () => {
      const w = await h.wallet(10_000_000);
      await coolThePrimary(w.key);
      h.fake.behaviour = { usage: USAGE };
      h.backup.behaviour = { failStatus: 503 };
      const res = await postChat(h, w.key, { model: 'fake/routed', messages: MESSAGES, stream: true });
      assert.equal(res.status, 200);
      assert.equal((await readServed(res)).deployment, 'fake/routed');
      assert.deepEqual([h.backup.received.length, h.fake.received.length], [1, 1], 'the ready fallback first, then the cooling primary');
    });

    test('both fail: the 502 counts the two deployments really called, nothing charged', async () => {
      const w = await h.wallet(10_000_000);
      await coolThePrimary(w.key);
      const before = (await h.balance(w.account)).balance_usdc;
      h.backup.behaviour = { failStatus: 502 };
      const res = await postChat(h, w.key, { model: 'fake/routed', messages: MESSAGES });
      assert.equal(res.status, 502);
      assert.match((await res.json()).message, /^every deployment of fake\/routed failed \(2 attempts\); the last: the provider answered 503/);
      assert.deepEqual([h.backup.received.length, h.fake.received.length], [1, 1]);
      assert.equal((await h.balance(w.account)).balance_usdc, before);
    });

    test('a stream whose primary is truly stuck (no headers) still moves on, and counts toward its cooldown', async () => {
      const w = await h.wallet(10_000_000);
      h.fake.behaviour = { usage: USAGE, delayMs: 2500 };
      for (let i = 0; i < 3; i++) {
        const res = await postChat(h, w.key, { model: 'fake/routed', messages: MESSAGES, stream: true });
        assert.equal((await readServed(res)).deployment, 'backup/routed-backup');
      }
      assert.deepEqual(
        h.gw.services.chat.routing.cooldown.cooling().map((c) => c.deployment),
        ['fake/routed'],
      );
    });
  });

/**
 * Provider refusals whose status reads as the deployment's trouble (429 busy, 402 out of credit,
 * 403 forbidden) but whose body says the request itself is refused, as each provider sends them.
 * Counted as the deployment's failure, one caller's oversized requests cooled a healthy deployment
 * for everyone and were sent on to every fallback (src/routing/request-refusal.ts).
 */
const REQUEST_REFUSALS = [
  {
    what: "OpenAI's 429 Request too large (TPM)",
    status: 429,
    body: {
      error: {
        message:
          'Request too large for gpt-4o in organization org-abc123 on tokens per min (TPM): Limit 30000, Requested 36278. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.',
        type: 'tokens',
        param: null,
        code: 'rate_limit_exceeded',
      },
    },
  },
  {
    what: "OpenRouter's 402 fewer max_tokens",
    status: 402,
    body: {
      error: {
        message:
          'This request requires more credits, or fewer max_tokens. You requested up to 65536 tokens, but can only afford 3395. To increase, visit https://openrouter.ai/settings/credits and upgrade to a paid account',
        code: 402,
        metadata: { provider_name: null },
      },
      user_id: 'user_2abc',
    },
  },
  {
    what: "OpenRouter's 403 moderation refusal",
    status: 403,
    body: {
      error: {
        code: 403,
        message: 'anthropic/claude-3-opus requires moderation on Anthropic. Your input was flagged for "violence". No credits were charged.',
        metadata: { reasons: ['violence'], flagged_input: 'how do I…', provider_name: 'Anthropic', model_slug: 'anthropic/claude-3-opus' },
      },
    },
  },
];

for (const engine of ENGINES)
  describe(`attack: a caller cannot cool a deployment for others, or fan out, with requests the provider refuses (${engine})`, () => {
    // One counted failure would cool the primary: the strictest setting shows any count.
    const harness = routingSuite(engine, USAGE, { chat: { cooldown: { failures: 1, windowSeconds: 60, seconds: 30 } } });
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));
    const cooldown = () => h.gw.services.chat.routing.cooldown;

    for (const refusal of REQUEST_REFUSALS) {
      test(`${refusal.what}: passed to the client, no fallback called, no cooldown; the next caller is served by the primary`, async () => {
        const attacker = await h.wallet(10_000_000);
        const victim = await h.wallet(10_000_000);
        h.fake.behaviour = { failStatus: refusal.status, failBody: refusal.body, retryAfter: '20' };
        const res = await postChat(h, attacker.key, { model: 'fake/routed', messages: MESSAGES, max_tokens: 4000 });
        const body = await res.json();
        assert.equal(res.status, 502, JSON.stringify(body));
        assert.equal(body.message, `the provider answered ${refusal.status}: ${refusal.body.error.message}; nothing was charged`);
        assert.equal(res.headers.get('x-should-retry'), 'false', 'the same request is refused again');
        assert.equal(res.headers.get('retry-after'), null);
        assert.deepEqual([h.fake.received.length, h.backup.received.length], [1, 0], 'no fallback was called');
        assert.deepEqual(cooldown().cooling(), []);
        assert.equal(cooldown().recentFailures('fake/routed'), 0);
        assert.equal((await h.balance(attacker.account)).balance_usdc, 10_000_000);

        h.fake.behaviour = { usage: USAGE };
        const next = await postChat(h, victim.key, { model: 'fake/routed', messages: [{ role: 'user', content: 'hi' }], max_tokens: 100 });
        await next.text();
        assert.equal(next.status, 200);
        assert.equal(next.headers.get('x-tollgate-deployment'), 'fake/routed');
      });
    }

    test('an embeddings request OpenAI refuses as too large for the TPM: passed on, no fallback, no cooldown', async () => {
      const w = await h.wallet(10_000_000);
      h.fake.behaviour = { failStatus: 429, failBody: REQUEST_REFUSALS[0]!.body };
      const res = await fetch(`${h.gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/embed-routed', input: 'hello' }),
      });
      assert.equal(res.status, 502);
      assert.match((await res.json()).message, /^the provider answered 429: Request too large for gpt-4o/);
      assert.deepEqual([h.fake.received.length, h.backup.received.length], [1, 0]);
      assert.equal(cooldown().recentFailures('fake/embed-routed'), 0);
    });

    test("Anthropic's 413 request_too_large ends the chain without a cooldown, as every refusal of the request does", async () => {
      const w = await h.wallet(10_000_000);
      h.anthropic.behaviour = { failStatus: 413 };
      const res = await postChat(h, w.key, { model: 'anth/claude-routed', messages: MESSAGES });
      assert.equal(res.status, 502);
      await res.text();
      assert.deepEqual([h.anthropic.received.length, h.fake.received.length], [1, 0]);
      assert.equal(cooldown().recentFailures('anth/claude-primary'), 0);
    });
  });

for (const engine of ENGINES)
  describe(`a provider refusal that is the deployment's trouble keeps its class (${engine})`, () => {
    // No cooldown starts here (1000 failures), so each test sees the primary ready and counts its own failure.
    const harness = routingSuite(engine, USAGE);
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    for (const [what, status, message] of [
      [
        "OpenAI's 429 Rate limit reached",
        429,
        'Rate limit reached for gpt-4o in organization org-abc123 on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.',
      ],
      [
        "OpenRouter's 402 with nothing affordable",
        402,
        'This request requires more credits, or fewer max_tokens. You requested up to 4096 tokens, but can only afford 0. To increase, visit https://openrouter.ai/settings/credits',
      ],
    ] as const) {
      test(`${what}: the fallback serves, and it counts toward the primary's cooldown`, async () => {
        const w = await h.wallet(10_000_000);
        const counted = h.gw.services.chat.routing.cooldown.recentFailures('fake/routed');
        h.fake.behaviour = { failStatus: status, failBody: { error: { message, code: status } } };
        const res = await postChat(h, w.key, { model: 'fake/routed', messages: MESSAGES });
        await res.text();
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('x-tollgate-deployment'), 'backup/routed-backup');
        assert.equal(h.gw.services.chat.routing.cooldown.recentFailures('fake/routed'), counted + 1);
      });
    }
  });
