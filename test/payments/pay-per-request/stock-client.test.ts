import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { proofQuery, siweProof } from '../../support/siwe.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';

/** payPerRequest.minUsd's default: every request below 1 cent is offered at 1 cent. */
const CENT = 10_000;

for (const engine of ENGINES) {
  describe(`pay-per-request chat with the stock openai SDK + @x402/fetch (${engine})`, () => {
    let h: PayPerRequestHarness;
    before(async () => {
      h = await startPayPerRequestHarness(engine);
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    /** Paid once on chain, credited once, charged what the usage row says: balance = paid − charged. */
    async function paidAndBilled(payer: FundedAccount, token: `0x${string}`, charged: number) {
      const wallet = payer.address.toLowerCase();
      assert.equal(await h.chain.balanceOf(token, payer.address), 10n * USD - BigInt(CENT));
      const payments = await h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', wallet).execute();
      assert.deepEqual(
        payments.map((p) => [p.status, Number(p.amount_usdc)]),
        [['credited', CENT]],
      );
      const usage = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('wallet', '=', wallet).execute();
      assert.equal(usage.length, 1);
      assert.equal(Number(usage[0]!.charged_usdc), charged);
      assert.ok(charged > 0);
      assert.equal(await h.balance(payer.address), CENT - charged, 'the unspent part stays in the balance');
      // The owner sees it in GET /v1/usage/:wallet, under the wallet's pay-per-request key.
      const seen = await call(h.gw.url, 'GET', `/v1/usage/${payer.address}?${proofQuery(await siweProof(payer))}`);
      assert.equal(seen.status, 200, seen.text);
      assert.equal(seen.body.balance_usdc, CENT - charged);
      assert.deepEqual(
        seen.body.keys.map((k: any) => [k.label, k.request_count, k.total_charged_usdc]),
        [['x402 pay-per-request', 1, charged]],
      );
      await assertLedgerConsistent(h.gw.services.storage.db);
    }

    test('USDC by EIP-3009, JSON completion: paid, answered with the receipt, billed against the payer', async () => {
      const payer = await h.payer(10n);
      const { data, response } = await h
        .openai(payer)
        .chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 })
        .withResponse();
      assert.match(data.choices[0]!.message.content!, /fake provider/);
      const receipt = decodePaymentResponseHeader(response.headers.get('payment-response')!);
      assert.equal(receipt.success, true);
      assert.equal(receipt.payer?.toLowerCase(), payer.address.toLowerCase());
      assert.equal(response.headers.get('x-payment-response'), response.headers.get('payment-response'));
      const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
      // 1 µ a prompt token, 2 a completion token, +20%, rounded up once.
      assert.equal(charged, Math.ceil((data.usage!.prompt_tokens + 2 * data.usage!.completion_tokens) * 1.2));
      // The usage states what the request took from the payer's balance, not the payment (a cent).
      assert.equal((data.usage as { charged_usdc?: number }).charged_usdc, charged);
      assert.equal(h.fake.received.at(-1)!.body.max_tokens, 100);
      await paidAndBilled(payer, h.chain.usdc, charged);
    });

    test('USDT by Permit2, streamed completion: the stream runs as usual after the payment', async () => {
      const payer = await h.payer(10n);
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const stream = await h.openai(payer, 'permit2').chat.completions.create({
        model: 'chat-small',
        messages: [{ role: 'user', content: 'stream please' }],
        max_tokens: 200,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let usage: { prompt_tokens: number; completion_tokens: number; charged_usdc?: number } | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        if (chunk.usage) usage = chunk.usage;
      }
      assert.match(text, /fake provider/);
      assert.ok(usage);
      const charged = Math.ceil((usage.prompt_tokens + 2 * usage.completion_tokens) * 1.2);
      assert.equal(usage.charged_usdc, charged, 'the stream states the charge taken from the balance');
      await paidAndBilled(payer, h.chain.usdt, charged);
    });

    test("the client's spend controls hold: a price above its per-payment cap is never signed", async () => {
      const payer = await h.payer(10n);
      const { x402Client, wrapFetchWithPayment } = await import('@x402/fetch');
      const { registerExactEvmScheme } = await import('@x402/evm/exact/client');
      const client = new x402Client();
      registerExactEvmScheme(client, { signer: payer });
      client.setSpendControls({
        maxAmountPerPayment: '$0.001',
        allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000' }],
      });
      const OpenAI = (await import('openai')).default;
      const sdk = new OpenAI({
        baseURL: `${h.gw.url}/v1`,
        apiKey: 'unused',
        defaultHeaders: { Authorization: null },
        fetch: wrapFetchWithPayment(fetch, client) as typeof fetch,
        maxRetries: 0,
      });
      const calls = h.fake.received.length;
      await assert.rejects(sdk.chat.completions.create({ model: 'fake/chat-small', messages: [{ role: 'user', content: 'hi' }] }));
      assert.equal(h.fake.received.length, calls, 'the provider was called');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD);
      assert.equal(await h.balance(payer.address), 0);
    });
    test('POST /v1/responses: the offer names the route; responses.create pays it and gets a Response, billed against the payer', async () => {
      const offer = await fetch(`${h.gw.url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 }),
      });
      assert.equal(offer.status, 402);
      assert.match((await offer.json()).resource.url, /\/v1\/responses$/);

      const payer = await h.payer(10n);
      const { data, response } = await h.openai(payer).responses.create({ model: 'fake/chat-small', input: 'hello', max_output_tokens: 100 }).withResponse();
      assert.match(data.output_text, /fake provider/);
      assert.equal(decodePaymentResponseHeader(response.headers.get('payment-response')!).success, true);
      await paidAndBilled(payer, h.chain.usdc, Number(response.headers.get('x-tollgate-charged-usdc')));
      // A payment is no durable identity to keep responses under: nothing is stored (store defaults to true).
      assert.equal((data as unknown as { store: boolean }).store, false);
      assert.equal((await h.gw.services.storage.db.selectFrom('stored_responses').select('id').execute()).length, 0);
    });

    test('attack: without an API key, previous_response_id and item_reference are a 400 before any offer: a payment never reads stored responses', async () => {
      for (const extra of [
        { previous_response_id: 'resp_1' },
        {
          input: [
            { role: 'user', content: 'hi' },
            { type: 'item_reference', id: 'msg_1' },
          ],
        },
      ]) {
        const res = await fetch(`${h.gw.url}/v1/responses`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'fake/chat-small', input: 'hello', ...extra }),
        });
        assert.equal(res.status, 400);
        assert.match((await res.json()).message, /kept only for requests made with an API key/);
      }
    });
  });
}
