import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { ENGINES } from '../../support/engines.ts';
import { MODELS } from '../../support/chat-harness.ts';
import { EMBEDDING_MODEL, EMBED_ID, expectedVector, fakeTokensOf, MICRO_PER_TOKEN } from '../../support/embeddings-harness.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { call } from '../../support/gateway.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { PER_INPUT_TOKENS } from '../../../src/embeddings/plan.ts';

/** payPerRequest.minUsd's default: every request below 1 cent is offered at 1 cent. */
const CENT = 10_000;

for (const engine of ENGINES) {
  describe(`pay-per-request embeddings with the stock openai SDK + @x402/fetch (${engine})`, () => {
    let h: PayPerRequestHarness;
    before(async () => {
      h = await startPayPerRequestHarness(engine, { config: { models: [...MODELS, EMBEDDING_MODEL] } });
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    test('the offer names /v1/embeddings; embeddings.create pays it once and is billed the reported tokens', async () => {
      const offer = await fetch(`${h.gw.url}/v1/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: EMBED_ID, input: 'hi' }),
      });
      assert.equal(offer.status, 402);
      const offered = await offer.json();
      assert.match(offered.resource.url, /\/v1\/embeddings$/);
      assert.match(offered.resource.description, /embeddings request/);

      const payer = await h.payer(10n);
      const input = ['paid for by the request itself', 'no API key'];
      const { data, response } = await h.openai(payer).embeddings.create({ model: EMBED_ID, input }).withResponse();
      assert.deepEqual(
        data.data.map((d) => d.embedding),
        input.map((t) => expectedVector(t)),
      );
      assert.equal(decodePaymentResponseHeader(response.headers.get('payment-response')!).success, true);
      const charged = fakeTokensOf(input) * MICRO_PER_TOKEN;
      assert.equal(response.headers.get('x-tollgate-charged-usdc'), String(charged));

      const wallet = payer.address.toLowerCase();
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD - BigInt(CENT), 'paid once, on chain');
      const usage = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('wallet', '=', wallet).execute();
      assert.deepEqual(
        usage.map((u) => [u.model, Number(u.prompt_tokens), Number(u.charged_usdc)]),
        [[EMBED_ID, fakeTokensOf(input), charged]],
      );
      assert.equal(await h.balance(payer.address), CENT - charged, 'the unspent part stays in the balance');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    describe('attack: a paid embeddings request replayed, and a provider lying about its usage', () => {
      const BODY = { model: EMBED_ID, input: 'replay me' };
      const RESERVATION = (Buffer.byteLength(BODY.input) + PER_INPUT_TOKENS) * MICRO_PER_TOKEN;
      const embedWith = (header: string) => call(h.gw.url, 'POST', '/v1/embeddings', BODY, { 'payment-signature': header });

      test('the same payment header sent again credits nothing more; the lie is charged no more than the quoted reservation', async () => {
        const offer = (await call(h.gw.url, 'POST', '/v1/embeddings', BODY)).body.accepts[0];
        const payer = await h.payer(1n);
        const header = v2Header(offer, await h.usdcPayment(payer, BigInt(CENT)));
        h.fake.behaviour = { usage: { prompt_tokens: 1_000_000, completion_tokens: 0 } };
        try {
          const first = await embedWith(header);
          assert.equal(first.status, 200, first.text);
          assert.equal(Number(first.headers.get('x-tollgate-charged-usdc')), RESERVATION, 'capped at the price it was quoted');
          const replay = await embedWith(header);
          assert.equal(replay.status, 200, replay.text);
        } finally {
          h.fake.behaviour = {};
        }
        const wallet = payer.address.toLowerCase();
        const credits = await h.gw.services.storage.db
          .selectFrom('ledger_entries')
          .select('amount_usdc')
          .where('wallet', '=', wallet)
          .where('kind', '=', 'topup')
          .execute();
        assert.deepEqual(
          credits.map((c) => Number(c.amount_usdc)),
          [CENT],
          'credited once',
        );
        assert.equal(await h.balance(payer.address), CENT - 2 * RESERVATION);
        assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - BigInt(CENT), 'paid once on chain');
        await assertLedgerConsistent(h.gw.services.storage.db);
      });
    });

    test('a bad input is a 400 before any offer, and a chat model is refused there too', async () => {
      for (const body of [
        { model: EMBED_ID, input: [] },
        { model: 'fake/chat-small', input: 'hi' },
      ]) {
        const res = await fetch(`${h.gw.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        assert.equal(res.status, 400);
        assert.equal(res.headers.get('payment-required'), null);
      }
    });

    test("attack: a provider failure after the payment charges nothing of it; the credit stays in the payer's balance", async () => {
      h.fake.behaviour = { failStatus: 503 };
      try {
        const payer = await h.payer(10n);
        await assert.rejects(h.openai(payer).embeddings.create({ model: EMBED_ID, input: 'fails upstream' }), (err: any) => err.status === 502);
        assert.equal(await h.balance(payer.address), CENT, 'credited once, charged nothing');
        await assertLedgerConsistent(h.gw.services.storage.db);
      } finally {
        h.fake.behaviour = {};
      }
    });
  });
}
