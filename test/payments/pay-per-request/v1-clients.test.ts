import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import axios from 'axios';
import OpenAI from 'openai';
import { withPaymentInterceptor, createSigner as createAxiosSigner } from 'x402-axios';
import { decodeXPaymentResponse } from 'x402-fetch';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { base64Json, v1Header } from '../../support/x402-payloads.ts';
import { V1_BODY, v1Fetch } from '../../support/x402-v1-clients.ts';

/**
 * Pay-per-request chat with topup.x402v1Body: the stock x402 v1 clients x402-fetch
 * 1.2.0 and x402-axios 0.7.2, as shipped, pay for one chat completion in USDC beside the stock v2
 * client @x402/fetch 2.27 on the same gateway; paid once, billed against the payer, ledger = chain.
 */
const CENT = 10_000;
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
const json = { 'content-type': 'application/json' };

for (const engine of ENGINES) {
  describe(`pay-per-request chat with the stock x402 v1 clients, v1 body on (${engine})`, () => {
    let h: PayPerRequestHarness;
    before(async () => {
      h = await startPayPerRequestHarness(engine, { config: V1_BODY });
    });
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });

    /** One cent paid on chain and credited once; the request's charge taken from it; the rest in the balance. */
    async function paidOnceAndBilled(payer: FundedAccount, charged: number) {
      const wallet = payer.address.toLowerCase();
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD - BigInt(CENT));
      const payments = await h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', wallet).execute();
      assert.deepEqual(
        payments.map((p) => [p.status, p.purpose, Number(p.amount_usdc)]),
        [['credited', 'chat', CENT]],
      );
      const usage = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('wallet', '=', wallet).execute();
      assert.deepEqual(
        usage.map((u) => Number(u.charged_usdc)),
        [charged],
      );
      assert.ok(charged > 0);
      assert.equal(await h.balance(payer.address), CENT - charged);
      await h.gw.assertLedger();
    }

    test('the 402 body is x402 v1 with resource = the route paid for; PAYMENT-REQUIRED stays v2', async () => {
      for (const [path, body] of [
        ['/v1/chat/completions', BODY],
        ['/v1/responses', { model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 }],
      ] as const) {
        const res = await fetch(`${h.gw.url}${path}`, { method: 'POST', headers: json, body: JSON.stringify(body) });
        assert.equal(res.status, 402);
        const offer = await res.json();
        assert.equal(offer.x402Version, 1);
        assert.equal(offer.required_usdc, CENT);
        assert.deepEqual(
          offer.accepts.map((a: any) => [a.network, a.asset, a.maxAmountRequired, a.amount, a.resource, a.mimeType]),
          [['base-sepolia', h.chain.usdc, String(CENT), String(CENT), `http://gateway.test${path}`, 'application/json']],
        );
        assert.match(offer.accepts[0].description, /chat completion/);
        const v2 = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
        assert.equal(v2.x402Version, 2);
        assert.equal(v2.resource.url, `http://gateway.test${path}`);
        assert.equal(v2.accepts.length, 2);
      }
    });

    test('x402-fetch 1.2.0 with its defaults (cap $0.10) pays a one-cent chat completion in USDC', async () => {
      const payer = await h.payer(10n);
      const client = await v1Fetch(payer);
      const res = await client.fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: json, body: JSON.stringify(BODY) });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.match(body.choices[0].message.content, /fake provider/);
      assert.equal(decodeXPaymentResponse(res.headers.get('x-payment-response')!).success, true);
      assert.equal(client.sent.length, 1);
      await paidOnceAndBilled(payer, Number(res.headers.get('x-tollgate-charged-usdc')));
    });

    test('x402-axios 0.7.2 with its defaults pays a one-cent chat completion in USDC', async () => {
      const payer = await h.payer(10n);
      const signer = await createAxiosSigner('base-sepolia', payer.privateKey);
      const res = await withPaymentInterceptor(axios.create({ baseURL: h.gw.url }), signer as never).post('/v1/chat/completions', BODY);
      assert.equal(res.status, 200);
      assert.match(res.data.choices[0].message.content, /fake provider/);
      assert.equal(decodeXPaymentResponse(res.headers['x-payment-response']).success, true);
      await paidOnceAndBilled(payer, Number(res.headers['x-tollgate-charged-usdc']));
    });

    test('finding: the openai SDK over x402-fetch 1.2.0 fails with 415 on the paid retry (the client drops a Headers object); nothing is paid or run', async () => {
      // x402-fetch 1.2.0 rebuilds the retry's headers as {...init.headers, 'X-PAYMENT': ...}; the
      // openai SDK passes a Headers instance, whose spread is empty, so content-type is lost.
      const payer = await h.payer(10n);
      const client = await v1Fetch(payer);
      const calls = h.fake.received.length;
      const sdk = new OpenAI({
        baseURL: `${h.gw.url}/v1`,
        apiKey: 'unused',
        defaultHeaders: { Authorization: null },
        fetch: client.fetch as typeof fetch,
        maxRetries: 0,
      });
      await assert.rejects(sdk.chat.completions.create(BODY as never), { status: 415 });
      assert.equal(client.sent.length, 1, 'it signed and sent a payment');
      assert.equal(h.fake.received.length, calls);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD);
      assert.equal(await h.balance(payer.address), 0);
      assert.equal((await h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute()).length, 0);
    });

    test('@x402/fetch 2.27 (with the openai SDK) on the same gateway pays from the v2 header', async () => {
      const payer = await h.payer(10n);
      const { data, response } = await h
        .openai(payer)
        .chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 })
        .withResponse();
      assert.match(data.choices[0]!.message.content!, /fake provider/);
      await paidOnceAndBilled(payer, Number(response.headers.get('x-tollgate-charged-usdc')));
    });

    test('the three clients at once: each request paid once and billed once', async () => {
      const [a, b, c] = await h.payers(3, 10n);
      const calls = h.fake.received.length;
      const axiosSigner = await createAxiosSigner('base-sepolia', b!.privateKey);
      const [r1, r2, r3] = await Promise.all([
        (await v1Fetch(a!)).fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: json, body: JSON.stringify(BODY) }),
        withPaymentInterceptor(axios.create({ baseURL: h.gw.url }), axiosSigner as never).post('/v1/chat/completions', BODY),
        h
          .openai(c!)
          .chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 })
          .withResponse(),
      ]);
      assert.deepEqual([r1.status, r2.status, r3.response.status], [200, 200, 200]);
      assert.equal(h.fake.received.length, calls + 3);
      await paidOnceAndBilled(a!, Number(r1.headers.get('x-tollgate-charged-usdc')));
      await paidOnceAndBilled(b!, Number(r2.headers['x-tollgate-charged-usdc']));
      await paidOnceAndBilled(c!, Number(r3.response.headers.get('x-tollgate-charged-usdc')));
    });
  });
}

for (const engine of ENGINES) {
  describe(`attack: x402 v1 payments on pay-per-request (v1 body on, ${engine})`, () => {
    let h: PayPerRequestHarness;
    before(async () => {
      h = await startPayPerRequestHarness(engine, { config: V1_BODY });
    });
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });
    const rowsOf = (payer: FundedAccount) =>
      h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();

    test("x402-fetch's top-up payment, sent to chat (v1 and as v2): refused, the provider is not called, credited once as a top-up", async () => {
      const payer = await h.payer(10n);
      const client = await v1Fetch(payer, USD);
      const topup = await client.fetch(`${h.gw.url}/v1/topup`, { method: 'POST', headers: json, body: JSON.stringify({ amount: 1 }) });
      assert.equal(topup.status, 200);
      const calls = h.fake.received.length;
      const v1 = JSON.parse(Buffer.from(client.sent[0]!, 'base64').toString());
      const chatOffer = decodePaymentRequiredHeader((await h.chat(BODY)).headers.get('payment-required')!).accepts[0]!;
      for (const header of [
        { 'x-payment': client.sent[0]! } as Record<string, string>,
        { 'payment-signature': base64Json({ x402Version: 2, accepted: { ...chatOffer, amount: String(USD) }, payload: v1.payload }) },
      ]) {
        const res = await h.chat(BODY, header);
        assert.equal(res.status, 402, res.text);
        assert.equal(res.body.error, 'PAYMENT_REJECTED');
        assert.equal(res.body.x402Version, 1);
      }
      assert.equal(h.fake.received.length, calls);
      assert.deepEqual(
        (await rowsOf(payer)).map((p) => [p.purpose, Number(p.amount_usdc)]),
        [['topup', 1_000_000]],
      );
      assert.equal(await h.balance(payer.address), 1_000_000);
    });

    test('a v1 chat payment replayed as v1 and as v2: credited once, never a second credit', async () => {
      const payer = await h.payer(10n);
      const client = await v1Fetch(payer);
      const first = await client.fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: json, body: JSON.stringify(BODY) });
      assert.equal(first.status, 200);
      const v1 = JSON.parse(Buffer.from(client.sent[0]!, 'base64').toString());
      const chatOffer = decodePaymentRequiredHeader((await h.chat(BODY)).headers.get('payment-required')!).accepts[0]!;
      await h.chat(BODY, { 'x-payment': client.sent[0]! });
      await h.chat(BODY, { 'payment-signature': base64Json({ x402Version: 2, accepted: chatOffer, payload: v1.payload }) });
      assert.deepEqual(
        (await rowsOf(payer)).map((p) => [p.status, Number(p.amount_usdc)]),
        [['credited', CENT]],
      );
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD - BigInt(CENT));
      const charged = await h.gw.services.storage.db
        .selectFrom('request_usage')
        .select('charged_usdc')
        .where('wallet', '=', payer.address.toLowerCase())
        .execute();
      assert.equal(await h.balance(payer.address), CENT - charged.reduce((s, r) => s + Number(r.charged_usdc), 0));
      assert.ok((await h.balance(payer.address)) >= 0);
    });

    test('a v1 chat payment naming another network, or for less than the price, runs nothing and moves nothing', async () => {
      const payer = await h.payer(1n);
      const calls = h.fake.received.length;
      const cent = await h.usdcPayment(payer, BigInt(CENT), { validAfter: BigInt(Math.floor(Date.now() / 1000) - 600) });
      for (const network of ['base', 'avalanche-fuji']) {
        const res = await h.chat(BODY, { 'x-payment': v1Header(network, cent) });
        assert.equal(res.status, 400, res.text);
        assert.equal(res.body.error, 'PAYMENT_MISMATCH');
      }
      const less = await h.usdcPayment(payer, BigInt(CENT - 1), { validAfter: BigInt(Math.floor(Date.now() / 1000) - 600) });
      const short = await h.chat(BODY, { 'x-payment': v1Header('base-sepolia', less) });
      assert.equal(short.status, 402, short.text);
      assert.equal(short.body.error, 'PAYMENT_INSUFFICIENT');
      assert.equal(h.fake.received.length, calls);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD);
      assert.equal((await rowsOf(payer)).length, 0);
    });
  });
}
