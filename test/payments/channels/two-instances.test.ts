import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import OpenAI from 'openai';
import { MODELS } from '../../support/chat-harness.ts';
import { mergeConfig } from '../../support/gateway.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { startTopupHarness, type TopupHarness } from '../../support/topup-harness.ts';
import { CHANNEL_CONFIG, CHAT_BODY, channelCharges, channelOf, channelPayer, openedChannel, paid, voucherHeader } from './channel-harness.ts';

/**
 * Two gateway instances on one PostgreSQL database, the same payTo and the same facilitator key:
 * a channel's requests are serialised across them by its row's lease, and a client may move from
 * one to the other mid-session.
 */
describe('attack: two instances sharing the channel table (postgres)', () => {
  let a: PayPerRequestHarness;
  let b: TopupHarness;
  before(async () => {
    a = await startPayPerRequestHarness('postgres', { config: CHANNEL_CONFIG });
    const config = mergeConfig(
      {
        providers: { fake: { baseUrl: a.fake.url }, other: { baseUrl: a.fake.url } },
        models: MODELS,
        rateLimits: { chat: { perMinute: 100_000, perDay: 1_000_000 } },
      },
      CHANNEL_CONFIG,
    );
    b = await startTopupHarness('postgres', {
      databaseUrl: a.gw.config.database.url,
      payTo: a.payTo,
      env: { TOLLGATE_RELAYER_KEY: a.relayer.privateKey },
      config,
    });
  });
  after(async () => {
    await a?.gw.assertLedger();
    await b?.stop();
    await a?.stop();
  });

  test('the same voucher at both instances at once: one runs, the other gets the busy 402 and runs nothing', async () => {
    const payer = await openedChannel(a);
    const v = await voucherHeader(a, payer, (ceiling, charged) => charged + ceiling);
    const calls = a.fake.received.length;
    a.fake.behaviour = { delayMs: 500 };
    try {
      const [atA, atB] = await Promise.all([paid(a, v.header), paid(a, v.header, b.gw.url)]);
      assert.deepEqual([atA.status, atB.status].sort(), [200, 402]);
      const refused = atA.status === 402 ? atA : atB;
      assert.equal(decodePaymentRequiredHeader(refused.headers.get('payment-required')!).error, 'invalid_batch_settlement_evm_channel_busy');
    } finally {
      a.fake.behaviour = {};
    }
    assert.equal(a.fake.received.length, calls + 1, 'the provider ran one of them');
    await assertLedgerConsistent(a.gw.services.storage.db);
  });

  test('a session moving between the instances: every request charged once, the channel one record', async () => {
    const account = await a.payer(10n);
    const payer = channelPayer(a, account);
    const atB = new OpenAI({ baseURL: `${b.gw.url}/v1`, apiKey: 'unused', defaultHeaders: { Authorization: null }, fetch: payer.fetch, maxRetries: 0 });
    const charges: number[] = [];
    for (let i = 0; i < 8; i++) {
      const sdk = i % 2 === 0 ? payer.openai : atB;
      const { response } = await sdk.chat.completions.create({ ...CHAT_BODY, messages: [{ role: 'user', content: `turn ${i}` }] }).withResponse();
      charges.push(Number(response.headers.get('x-tollgate-charged-usdc')));
    }
    const channel = (await channelOf(a, account))!;
    assert.deepEqual(await channelCharges(a, channel.channel_id), charges);
    assert.equal(
      channel.charged_usdc,
      charges.reduce((x, y) => x + y, 0),
    );
    assert.equal(channel.deposited_usdc, 1_000_000, 'one deposit for the whole session, whichever instance took it');
    await assertLedgerConsistent(a.gw.services.storage.db);
  });
});
