import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import { startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { call } from '../support/gateway.ts';

const UPSTREAM_KEY = 'sk-upstream-secret-0123456789';

/** Every JSON log line the gateway wrote, parsed. */
const logLines = (h: ChatHarness) =>
  h.gw
    .logs()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

for (const engine of ENGINES) {
  describe(`a provider whose key variable is unset (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      // FAKE_KEY (the fake provider's apiKeyEnv) is empty, as when an operator forgot to export it.
      h = await startChatHarness(engine, {}, { env: { FAKE_KEY: '' } });
    });
    after(() => h?.stop());

    test('is never called: 503 PROVIDER_NOT_CONFIGURED, nothing reserved or charged, the variable named only in the log', async () => {
      const { key, account } = await h.wallet(1_000_000);
      const before = await h.balance(account);
      for (const stream of [false, true]) {
        const res = await call(
          h.gw.url,
          'POST',
          '/v1/chat/completions',
          { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream },
          { authorization: `Bearer ${key}` },
        );
        assert.equal(res.status, 503, res.text);
        assert.equal(res.body.error, 'PROVIDER_NOT_CONFIGURED');
        assert.match(res.body.message, /model fake\/chat-small is not available on this gateway right now; nothing was charged/);
        assert.doesNotMatch(res.text, /FAKE_KEY/, 'the client is not told how the gateway is configured');
      }
      assert.equal(h.fake.received.length, 0, 'nothing went upstream without its key');
      assert.deepEqual(await h.balance(account), before);
      const reservations = await h.gw.services.storage.db.selectFrom('reservations').select('request_id').execute();
      assert.equal(reservations.length, 0, 'no reservation was made');
      const refused = logLines(h).filter((l) => l.variable === 'FAKE_KEY');
      assert.equal(refused.length, 2);
      assert.equal(refused[0]!.level, 40);
      assert.match(String(refused[0]!.msg), /provider fake has no API key; set FAKE_KEY and restart/);
      await h.gw.assertLedger();
    });

    test('a provider without apiKeyEnv (a local model server) needs no key', async () => {
      const { key } = await h.wallet(1_000_000);
      const res = await call(
        h.gw.url,
        'POST',
        '/v1/chat/completions',
        { model: 'other/shared-name', messages: [{ role: 'user', content: 'hi' }] },
        { authorization: `Bearer ${key}` },
      );
      assert.equal(res.status, 200, res.text);
      await h.gw.assertLedger();
    });
  });

  describe(`provider failures are logged for the operator (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      h = await startChatHarness(engine, {}, { env: { FAKE_KEY: UPSTREAM_KEY } });
    });
    after(() => h?.stop());

    test('at warn, with provider, model, status or transport error and request id, never the key', async () => {
      const { key } = await h.wallet(1_000_000);
      const chat = (stream: boolean) =>
        call(
          h.gw.url,
          'POST',
          '/v1/chat/completions',
          { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }], stream },
          { authorization: `Bearer ${key}` },
        );

      h.fake.behaviour = { failStatus: 500 };
      const failed = await chat(false);
      assert.equal(failed.status, 502, failed.text);
      h.fake.behaviour = { cutAfterChunks: 1 };
      const cut = await chat(true);
      assert.equal(cut.status, 200);
      assert.match(cut.text, /upstream_error/);
      h.fake.behaviour = {};

      const warnings = logLines(h).filter((l) => l.level === 40 && String(l.msg).startsWith('provider call failed'));
      const byStatus = warnings.find((l) => l.requestId === failed.headers.get('x-request-id'));
      assert.ok(byStatus, `a warning for request ${failed.headers.get('x-request-id')}: ${JSON.stringify(warnings)}`);
      assert.equal(byStatus.provider, 'fake');
      assert.equal(byStatus.model, 'fake/chat-small');
      assert.equal(byStatus.status, 500);
      const byTransport = warnings.find((l) => l.requestId === cut.headers.get('x-request-id'));
      assert.ok(byTransport, 'the cut stream is logged too');
      assert.equal(typeof byTransport.transportError, 'string');
      assert.ok(!h.gw.logs().includes(UPSTREAM_KEY), 'the provider key never reaches the log');
      await h.gw.assertLedger();
    });
  });
}
