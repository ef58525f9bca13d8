import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toClientEvmSigner } from '@x402/evm';
import { computeChannelId, signVoucher } from '@x402/evm/batch-settlement/client';
import { MODELS } from '../../support/chat-harness.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { call } from '../../support/gateway.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import {
  CHANNEL_CONFIG,
  CHAT_BODY,
  channelCharges,
  channelOf,
  channelOffersOf,
  channelPayer,
  channelSuite,
  openedChannel,
  paid,
  voucherHeader,
} from './channel-harness.ts';
import { assertClaimedAsCharged, claimPass } from './claims-setup.ts';

/**
 * A channel's terms changed between requests, and the parties lying or stalling: a ceiling that
 * went down, a channel config naming another receiver or token, a claim landing mid-session, a
 * provider reporting more usage than the ceiling allows, a fallback deployment dearer than the
 * first, and a stream outlasting its lease. Nothing is charged above a voucher's ceiling, what is
 * charged is claimed, and ledger-check stays clean.
 */

/** A model whose first deployment is down (nothing listens on port 1) and whose fallback costs ten times more. */
const FALLBACK_MODEL = {
  provider: 'down',
  name: 'with-fallback',
  contextLength: 8000,
  promptCostPer1M: '1',
  completionCostPer1M: '2',
  fallbacks: [{ provider: 'other', promptCostPer1M: '10', completionCostPer1M: '20' }],
};
const { batchSettlement } = CHANNEL_CONFIG.payPerRequest;
const SUITE = {
  payPerRequest: { ...CHANNEL_CONFIG.payPerRequest, batchSettlement: { ...batchSettlement, claimIntervalSeconds: 300 } },
  providers: { down: { baseUrl: 'http://127.0.0.1:1' } },
  models: [...MODELS, FALLBACK_MODEL],
};

const usdcEntry = async (h: PayPerRequestHarness, body: unknown) =>
  channelOffersOf((await h.chat(body)).body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;

for (const engine of ENGINES) {
  describe(`attack: a channel's terms changed mid-way, a lying provider, a dearer fallback (${engine})`, () => {
    const harness = channelSuite(engine, SUITE);

    test("a voucher for a larger request's ceiling, sent with a smaller request, runs nothing: the ceiling is the server's", async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const big = { ...CHAT_BODY, max_tokens: 2000 };
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      const large = await usdcEntry(h, big);
      const small = await usdcEntry(h, CHAT_BODY);
      assert.ok(Number(large.amount) > Number(small.amount));
      const before = (await channelOf(h, payer))!;
      const config = channelPayer(h, payer).scheme.buildChannelConfig(large);
      const signedForLarge = await signVoucher(toClientEvmSigner(payer), v.channelId, String(before.charged_usdc + Number(large.amount)), large.network);
      const calls = h.fake.received.length;
      // Its own entry echoed: the amount is not this request's.
      const echoed = await paid(h, v2Header(large, { type: 'voucher', channelConfig: config, voucher: signedForLarge }));
      assert.equal(echoed.status, 400, echoed.text.slice(0, 300));
      assert.match(echoed.body.message, /request ceiling/);
      // This request's entry with the larger cumulative: the corrective 402 names what to sign.
      const moved = await paid(h, v2Header(small, { type: 'voucher', channelConfig: config, voucher: signedForLarge }));
      assert.equal(moved.status, 402, moved.text.slice(0, 300));
      assert.equal(moved.body.error, 'invalid_batch_settlement_evm_cumulative_amount_mismatch');
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal((await channelOf(h, payer))!.charged_usdc, before.charged_usdc);
      assert.equal((await paid(h, v.header)).status, 200, "this request's own voucher is still good");
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a channel config naming another receiver or another token is a 400 naming the term, before anything is verified', async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const offer = await usdcEntry(h, CHAT_BODY);
      const own = channelPayer(h, payer).scheme.buildChannelConfig(offer);
      const stranger = (await h.payer(0n)).address;
      const cases = { receiver: { ...own, receiver: stranger }, token: { ...own, token: h.chain.usdt } };
      const calls = h.fake.received.length;
      for (const [term, config] of Object.entries(cases)) {
        const channelId = computeChannelId(config, offer.network);
        const voucher = await signVoucher(toClientEvmSigner(payer), channelId, offer.amount, offer.network);
        const answer = await paid(h, v2Header(offer, { type: 'voucher', channelConfig: config, voucher }));
        assert.equal(answer.status, 400, `${term}: ${answer.text.slice(0, 300)}`);
        assert.match(answer.body.message, new RegExp(term === 'receiver' ? 'pays' : "channel's token"), term);
      }
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a claim landing mid-session: the stock client goes on on the same channel, and the next claim takes exactly the rest', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      for (let i = 0; i < 2; i++) await payer.openai.chat.completions.create(CHAT_BODY);
      await claimPass(h, {}, true);
      const claimed = (await channelOf(h, account))!;
      assert.equal(claimed.total_claimed_usdc, claimed.charged_usdc, 'the first claim took everything charged');
      for (let i = 0; i < 2; i++) await payer.openai.chat.completions.create(CHAT_BODY);
      const row = (await channelOf(h, account))!;
      assert.ok(row.charged_usdc > claimed.charged_usdc);
      assert.equal(
        row.charged_usdc,
        (await channelCharges(h, row.channel_id)).reduce((a, b) => a + b, 0),
      );
      await claimPass(h, {}, true);
      await assertClaimedAsCharged(h, [row.channel_id]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a provider reporting far more usage than the ceiling allows: the request is charged its ceiling and no more, and that is claimed', async () => {
      const h = harness();
      const account = await openedChannel(h);
      const v = await voucherHeader(h, account, (ceiling, charged) => charged + ceiling);
      const before = (await channelOf(h, account))!;
      h.fake.behaviour = { usage: { prompt_tokens: 5_000_000, completion_tokens: 5_000_000 } };
      let answer: Awaited<ReturnType<typeof paid>>;
      try {
        answer = await paid(h, v.header);
      } finally {
        h.fake.behaviour = {};
      }
      assert.equal(answer.status, 200, answer.text.slice(0, 300));
      const after = (await channelOf(h, account))!;
      assert.equal(after.charged_usdc - before.charged_usdc, v.ceiling, 'charged exactly the ceiling');
      assert.equal(after.signed_max_usdc, before.charged_usdc + v.ceiling);
      await assertLedgerConsistent(h.gw.services.storage.db);
      await claimPass(h, {}, true);
      await assertClaimedAsCharged(h, [after.channel_id]);
    });

    test("a fallback deployment ten times dearer serves the request: the ceiling already covers it, the charge is the model's price within it", async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      const body = { ...CHAT_BODY, model: 'down/with-fallback' };
      const ceiling = Number((await usdcEntry(h, body)).amount);
      const { response } = await payer.openai.chat.completions.create(body).withResponse();
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      assert.ok(charged > 0 && charged <= ceiling, `charged ${charged} within the ceiling ${ceiling}`);
      const row = (await channelOf(h, account))!;
      assert.equal(row.charged_usdc, charged);
      const usage = await h.gw.services.storage.db
        .selectFrom('request_usage')
        .selectAll()
        .where('wallet', '=', `${row.channel_id}#channel`)
        .executeTakeFirstOrThrow();
      assert.match(String(usage.deployment), /^other/, 'the fallback served it');
      assert.ok(Number(usage.provider_cost_usdc) <= charged, `the fallback's cost ${usage.provider_cost_usdc} is within the charge ${charged}`);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });

  describe(`attack: a stream outlasting its channel lease (${engine})`, () => {
    const harness = channelSuite(engine, { payPerRequest: { ...CHANNEL_CONFIG.payPerRequest, batchSettlement: { ...batchSettlement, leaseSeconds: 1 } } });

    test('a slow stream keeps its channel past several lease lengths (renewed); a request meanwhile is busy; then served', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      await payer.openai.chat.completions.create(CHAT_BODY);
      h.fake.behaviour = { content: Array.from({ length: 20 }, (_, i) => `w${i}`).join(' '), chunkDelayMs: 150 };
      const late: number[] = [];
      try {
        const stream = await payer.openai.chat.completions.create({ ...CHAT_BODY, stream: true });
        let chunks = 0;
        for await (const _ of stream) {
          // Two and a half lease lengths into the stream.
          if (++chunks !== 17) continue;
          const held = (await channelOf(h, account))!;
          assert.ok(held.lease_until !== null && held.lease_until > Date.now(), `the lease was renewed: it ends at ${held.lease_until}`);
          const v = await voucherHeader(h, account, (ceiling, charged) => charged + ceiling);
          const answer = await call(h.gw.url, 'POST', '/v1/chat/completions', CHAT_BODY, { 'payment-signature': v.header });
          late.push(answer.status);
          assert.equal(answer.body.error, 'invalid_batch_settlement_evm_channel_busy', answer.text.slice(0, 300));
        }
      } finally {
        h.fake.behaviour = {};
      }
      assert.deepEqual(late, [402]);
      const next = await payer.openai.chat.completions.create(CHAT_BODY).withResponse();
      assert.ok(next.data.choices[0]);
      const row = (await channelOf(h, account))!;
      assert.equal(
        row.charged_usdc,
        (await channelCharges(h, row.channel_id)).reduce((a, b) => a + b, 0),
        'three requests, each charged once',
      );
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
