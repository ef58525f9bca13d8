import assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ENGINES } from '../support/engines.ts';
import { expectNothingCharged, usageRowsOf } from '../support/usage-rows.ts';
import { routingSuite, type RoutingHarness } from '../support/routing-harness.ts';

const FUNDS = 1_000_000;
/** The fake reports 40 prompt tokens: billed at the listed 1.2 micro-USDC a token (1 + 20% markup), rounded up once. */
const USAGE = { prompt_tokens: 40, completion_tokens: 0 };
const CHARGE = 48;
/** What each deployment costs us for 40 tokens: the primary at 1, the backup at 0.5 micro-USDC a token. */
const BACKUP_COST = 20;

for (const engine of ENGINES) {
  describe(`embeddings over deployments (${engine})`, () => {
    const harness = routingSuite(engine, USAGE);
    let h: RoutingHarness;
    beforeEach(() => (h = harness()));

    const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${h.gw.url}/v1`, maxRetries: 0 });

    for (const failStatus of [500, 503, 429]) {
      test(`the primary answers ${failStatus}: the fallback serves the openai SDK's default (base64) request, billed once at the listed price`, async () => {
        const w = await h.wallet(FUNDS);
        h.fake.behaviour = { failStatus };
        const { data, response } = await client(w.key)
          .embeddings.create({ model: 'fake/embed-routed', input: ['one', 'two'] })
          .withResponse();
        assert.equal(data.data.length, 2);
        assert.equal(data.data[0]!.embedding.length, 8, 'the base64 vectors decoded by the SDK');
        assert.equal(response.headers.get('x-tollgate-deployment'), 'backup/embed-backup');
        assert.equal(h.fake.received.length, 1, 'the primary was tried once');
        assert.equal(h.backup.received.length, 1);
        assert.equal(h.backup.received[0]!.body.model, 'embed-backup', "the fallback's own model name");
        assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
        const rows = await usageRowsOf(h, w.keyId);
        assert.deepEqual(
          rows.map((r) => [r.status, Number(r.charged_usdc), Number(r.provider_cost_usdc), r.deployment]),
          [['ok', CHARGE, BACKUP_COST, 'backup/embed-backup']],
        );
      });
    }

    test('every deployment fails: 502, nothing charged, each tried exactly once', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 502 };
      h.backup.behaviour = { failStatus: 503 };
      const res = await fetch(`${h.gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/embed-routed', input: 'x' }),
      });
      assert.equal(res.status, 502);
      assert.match((await res.json()).message, /every deployment of fake\/embed-routed failed \(2 attempts\); the last: the provider answered 503/);
      assert.equal(h.fake.received.length, 1);
      assert.equal(h.backup.received.length, 1);
      await expectNothingCharged(h, w, FUNDS);
    });

    test("the primary's 400 (the request's fault) is not retried on the fallback", async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { failStatus: 400 };
      await assert.rejects(client(w.key).embeddings.create({ model: 'fake/embed-routed', input: 'x' }), (err: any) => err.status === 502);
      assert.equal(h.backup.received.length, 0);
      await expectNothingCharged(h, w, FUNDS);
    });

    test("the primary's first-byte timeout: the fallback serves; the primary is not asked again nor counted toward a cooldown (an answer sent whole: maybe the request's size)", async () => {
      const w = await h.wallet(FUNDS);
      // 2.5 s, not 1.5: undici's timers aim at 500 ms accuracy, so a 1 s first-byte timeout can fire
      // after a 1.5 s answer arrived, and more so on a loaded machine.
      h.fake.behaviour = { usage: USAGE, delayMs: 2500 };
      const failuresBefore = h.gw.services.chat.routing.cooldown.recentFailures('fake/embed-routed');
      const res = await fetch(`${h.gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/embed-routed', input: 'x' }),
      });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-tollgate-deployment'), 'backup/embed-backup');
      await res.json();
      assert.deepEqual([h.fake.received.length, h.backup.received.length], [1, 1]);
      assert.equal(h.gw.services.chat.routing.cooldown.recentFailures('fake/embed-routed') - failuresBefore, 0);
      assert.equal((await h.balance(w.account)).balance_usdc, FUNDS - CHARGE);
    });

    test('every deployment times out: a 502 that says how to cost less, not retried by the SDK, nothing charged', async () => {
      const w = await h.wallet(FUNDS);
      h.fake.behaviour = { usage: USAGE, delayMs: 2500 };
      h.backup.behaviour = { usage: USAGE, delayMs: 2500 };
      const res = await fetch(`${h.gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/embed-routed', input: 'x' }),
      });
      assert.equal(res.status, 502);
      assert.equal(res.headers.get('x-should-retry'), 'false');
      assert.match((await res.json()).message, /the provider timed out before answering \(.*send fewer or shorter inputs per request\)/);
      assert.deepEqual([h.fake.received.length, h.backup.received.length], [1, 1], 'each deployment asked once');
      assert.deepEqual(h.gw.services.chat.routing.cooldown.cooling(), []);
      await expectNothingCharged(h, w, FUNDS);
    });
  });
}
