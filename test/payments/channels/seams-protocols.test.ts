import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { CHAT_BODY, channelCharges, channelOf, channelPayer, channelSuite } from './channel-harness.ts';

/**
 * One channel paying every paid protocol the gateway serves, JSON and streamed, with the stock
 * client: Anthropic Messages and OpenAI Responses beside chat completions. Each request is charged
 * exactly its bill once, whatever protocol the one before it spoke (a stream's charge reaches the
 * client through the corrective 402 of its next request, on another route).
 */

const MESSAGES = { model: 'fake/chat-small', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] };
const RESPONSES = { model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 };

for (const engine of ENGINES) {
  describe(`batch-settlement channels across protocols (${engine})`, () => {
    const harness = channelSuite(engine);

    test('Messages and Responses, JSON and streamed, then chat, on one channel: each served and charged its bill once, one deposit', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const { fetch: paying } = channelPayer(h, account);
      const steps: [string, unknown][] = [
        ['/v1/messages', MESSAGES],
        ['/v1/messages', { ...MESSAGES, stream: true }],
        ['/v1/responses', RESPONSES],
        ['/v1/responses', { ...RESPONSES, stream: true }],
        ['/v1/messages', MESSAGES],
        ['/v1/chat/completions', CHAT_BODY],
      ];
      for (const [path, body] of steps) {
        const res = await paying(`${h.gw.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const text = await res.text();
        assert.equal(res.status, 200, `${path}: ${text.slice(0, 300)}`);
        assert.ok(text.length > 0, `${path} answered`);
        await assertLedgerConsistent(h.gw.services.storage.db);
      }
      const row = (await channelOf(h, account))!;
      const charges = await channelCharges(h, row.channel_id);
      assert.equal(charges.length, steps.length, 'one usage row per request');
      assert.ok(charges.every((c) => c > 0));
      assert.equal(
        row.charged_usdc,
        charges.reduce((a, b) => a + b, 0),
        'the channel is charged the sum of the bills',
      );
      const deposits = await h.gw.services.storage.db
        .selectFrom('channel_transfers')
        .select('id')
        .where('channel_id', '=', row.channel_id)
        .where('kind', '=', 'deposit')
        .execute();
      assert.equal(deposits.length, 1, 'one deposit for the whole session');
    });
  });
}
