import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { wrapFetchWithPayment as wrapV1Fetch, createSigner, decodeXPaymentResponse } from 'x402-fetch';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { base64Json, signEip3009, v1Header } from '../../support/x402-payloads.ts';
import { V1_BODY, v1Fetch, v1Axios } from '../../support/x402-v1-clients.ts';

/**
 * topup.x402v1Body: the stock x402 v1 clients, x402-fetch 1.2.0 and x402-axios 0.7.2,
 * used as shipped (their signer for "base-sepolia", the dev chain's id 84532), and the stock v2
 * client @x402/fetch 2.27, all top up on the same gateway; the ledger equals the chain after each.
 */
const json = { 'content-type': 'application/json' };

for (const engine of ENGINES) {
  describe(`top-ups with the stock x402 v1 clients, v1 body on (${engine})`, () => {
    let h: TopupHarness;
    before(async () => {
      h = await startTopupHarness(engine, { config: V1_BODY });
    });
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });

    test('x402-fetch 1.2.0: refuses a $1 top-up with its default cap ($0.10) before signing; with maxValue it pays USDC, 200, X-PAYMENT-RESPONSE', async () => {
      const payer = await h.payer(10n);
      const capped = await v1Fetch(payer);
      await assert.rejects(
        capped.fetch(`${h.gw.url}/v1/topup`, { method: 'POST', headers: json, body: JSON.stringify({ amount: 1 }) }),
        /exceeds maximum allowed/,
      );
      assert.equal(capped.sent.length, 0, 'nothing signed');

      const before = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
      const client = await v1Fetch(payer, 5n * USD);
      const res = await client.fetch(`${h.gw.url}/v1/topup`, { method: 'POST', headers: json, body: JSON.stringify({ amount: 5 }) });
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal(body.credited_usdc, 5_000_000);
      assert.equal(body.wallet, payer.address.toLowerCase());
      assert.equal(client.sent.length, 1);
      const sent = JSON.parse(Buffer.from(client.sent[0]!, 'base64').toString());
      assert.deepEqual([sent.x402Version, sent.scheme, sent.network], [1, 'exact', 'base-sepolia']);
      const receipt = decodeXPaymentResponse(res.headers.get('x-payment-response')!);
      assert.equal(receipt.success, true);
      assert.equal(receipt.transaction, body.transaction);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
      assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - before, 5n * USD);
      assert.equal(await h.balance(payer.address), 5_000_000);
      await h.gw.assertLedger();
    });

    test('x402-axios 0.7.2 with its defaults pays a USDC top-up: 200 and ledger = chain', async () => {
      const payer = await h.payer(10n);
      const before = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
      const res = await (await v1Axios(payer, h.gw.url)).post('/v1/topup', { amount: 3 });
      assert.equal(res.status, 200, JSON.stringify(res.data));
      assert.equal(res.data.credited_usdc, 3_000_000);
      assert.equal(decodeXPaymentResponse(res.headers['x-payment-response']).success, true);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 7n * USD);
      assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - before, 3n * USD);
      assert.equal(await h.balance(payer.address), 3_000_000);
      await h.gw.assertLedger();
    });

    test('@x402/fetch 2.27 on the same gateway reads PAYMENT-REQUIRED (v2) and pays USDC by EIP-3009 and USDT by Permit2', async () => {
      const payer = await h.payer(10n);
      const usdc = await h.topup(payer, 2);
      assert.equal(usdc.status, 200, await usdc.clone().text());
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const usdt = await h.topup(payer, 4, 'permit2');
      assert.equal(usdt.status, 200, await usdt.clone().text());
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 6n * USD);
      assert.equal(await h.balance(payer.address), 6_000_000);
      await h.gw.assertLedger();
    });

    test('all three clients at once, on one gateway: each credited once, ledger = chain', async () => {
      const [a, b, c] = await h.payers(3, 10n);
      const before = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
      const [r1, r2, r3] = await Promise.all([
        (await v1Fetch(a!, 10n * USD)).fetch(`${h.gw.url}/v1/topup`, { method: 'POST', headers: json, body: JSON.stringify({ amount: 1.5 }) }),
        (await v1Axios(b!, h.gw.url)).post('/v1/topup', { amount: 2.5 }),
        h.topup(c!, 3.5),
      ]);
      assert.deepEqual([r1.status, r2.status, r3.status], [200, 200, 200]);
      assert.deepEqual([await h.balance(a!.address), await h.balance(b!.address), await h.balance(c!.address)], [1_500_000, 2_500_000, 3_500_000]);
      assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - before, 7_500_000n);
      await h.gw.assertLedger();
    });
  });
}

describe('the x402 v1 402 body (topup.x402v1Body)', () => {
  let h: TopupHarness;
  before(async () => {
    h = await startTopupHarness('sqlite', { config: V1_BODY });
  });
  after(() => h?.stop());

  test('body: x402 v1, the USDC (EIP-3009) offer only, by v1 name, with resource/description/mimeType; PAYMENT-REQUIRED stays v2 with every offer', async () => {
    const res = await h.post({ amount: 5.25 });
    assert.equal(res.status, 402);
    assert.equal(res.body.x402Version, 1);
    assert.equal(res.body.error, 'PAYMENT_REQUIRED');
    assert.match(res.body.message, /X-Payment/);
    assert.deepEqual(res.body.accepts, [
      {
        scheme: 'exact',
        network: 'base-sepolia',
        amount: '5250000',
        maxAmountRequired: '5250000',
        resource: 'http://gateway.test/v1/topup',
        description: 'Prepaid balance for Tollgate inference',
        mimeType: 'application/json',
        payTo: h.payTo.address,
        maxTimeoutSeconds: 300,
        asset: h.chain.usdc,
        extra: { assetTransferMethod: 'eip3009', name: 'USD Coin', version: '2', decimals: 6 },
      },
    ]);
    const header = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
    assert.equal(header.x402Version, 2);
    assert.equal(header.resource.url, 'http://gateway.test/v1/topup');
    assert.deepEqual(
      header.accepts.map((a) => [a.network, a.asset, a.amount, a.extra?.assetTransferMethod]),
      [
        [h.chain.network, h.chain.usdc, '5250000', 'eip3009'],
        [h.chain.network, h.chain.usdt, '5250000', 'permit2'],
      ],
    );
  });

  test('a rejected payment is answered with the v1 body too (the client reads it)', async () => {
    const payer = await h.payer(0n); // holds nothing: the transfer cannot be simulated
    const payload = await signEip3009({
      token: h.chain.usdc,
      chainId: h.anvil.chainId,
      domain: USDC_DOMAIN,
      from: payer,
      to: h.payTo.address,
      value: USD,
      validAfter: BigInt(Math.floor(Date.now() / 1000) - 600),
    });
    const res = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', payload) });
    assert.equal(res.status, 402, res.text);
    assert.equal(res.body.error, 'PAYMENT_REJECTED');
    assert.equal(res.body.x402Version, 1);
    assert.equal(res.body.accepts[0].network, 'base-sepolia');
  });

  test('off (the default): the body is the v2 offer, as the specification shows, and x402-fetch 1.2.0 fails on it before signing', async () => {
    const plain = await startTopupHarness('sqlite');
    try {
      const res = await plain.post({ amount: 1 });
      assert.equal(res.body.x402Version, 2);
      assert.equal(res.body.accepts[0].network, plain.chain.network);
      const payer = await plain.payer(5n);
      const client = await v1Fetch(payer, 5n * USD);
      await assert.rejects(client.fetch(`${plain.gw.url}/v1/topup`, { method: 'POST', headers: json, body: JSON.stringify({ amount: 1 }) }), {
        name: 'ZodError',
      });
      assert.equal(client.sent.length, 0);
      assert.equal(await plain.chain.balanceOf(plain.chain.usdc, payer.address), 5n * USD);
    } finally {
      await plain.stop();
    }
  });
});

for (const engine of ENGINES) {
  describe(`attack: x402 v1 payments on top-ups (v1 body on, ${engine})`, () => {
    let h: TopupHarness;
    before(async () => {
      h = await startTopupHarness(engine, { config: V1_BODY });
    });
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });

    const rowsOf = (payer: FundedAccount) =>
      h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();
    const v1Usdc = (payer: FundedAccount, value: bigint) =>
      signEip3009({
        token: h.chain.usdc,
        chainId: h.anvil.chainId,
        domain: USDC_DOMAIN,
        from: payer,
        to: h.payTo.address,
        value,
        validAfter: BigInt(Math.floor(Date.now() / 1000) - 600),
      });

    test('a v1 payment replayed as v2 (and the v2 form replayed as v1) is the same payment: credited once', async () => {
      const payer = await h.payer(10n);
      const client = await v1Fetch(payer, 10n * USD);
      const first = await client.fetch(`${h.gw.url}/v1/topup`, { method: 'POST', headers: json, body: JSON.stringify({ amount: 2 }) });
      assert.equal(first.status, 200);
      const v1 = JSON.parse(Buffer.from(client.sent[0]!, 'base64').toString());
      const offered = decodePaymentRequiredHeader((await h.post({ amount: 2 })).headers.get('payment-required')!).accepts[0]!;
      const asV2 = await h.post({ amount: 2 }, { 'payment-signature': base64Json({ x402Version: 2, accepted: offered, payload: v1.payload }) });
      const asV1Again = await h.post({ amount: 2 }, { 'x-payment': client.sent[0]! });
      for (const r of [asV2, asV1Again]) {
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.credited_usdc, 2_000_000);
      }
      assert.equal(await h.balance(payer.address), 2_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 8n * USD);
      assert.equal((await rowsOf(payer)).length, 1);
    });

    test('the same v1 header sent twice at once, and its v2 form with it: one settlement, one credit', async () => {
      const payer = await h.payer(10n);
      const payload = await v1Usdc(payer, 3n * USD);
      const offered = decodePaymentRequiredHeader((await h.post({ amount: 3 })).headers.get('payment-required')!).accepts[0]!;
      const results = await Promise.all([
        h.post({ amount: 3 }, { 'x-payment': v1Header('base-sepolia', payload) }),
        h.post({ amount: 3 }, { 'x-payment': v1Header('base-sepolia', payload) }),
        h.post({ amount: 3 }, { 'payment-signature': base64Json({ x402Version: 2, accepted: offered, payload }) }),
      ]);
      for (const r of results) assert.ok([200, 202, 503].includes(r.status), `${r.status} ${r.text}`);
      assert.ok(results.some((r) => r.status === 200));
      assert.equal(await h.balance(payer.address), 3_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 7n * USD);
      assert.equal((await rowsOf(payer)).length, 1);
    });

    test('a v1 payment naming another network (base, polygon, an unknown name) is refused before settling; nothing moves', async () => {
      const payer = await h.payer(5n);
      const payload = await v1Usdc(payer, USD);
      for (const network of ['base', 'polygon', 'base-mainnet', 'ethereum']) {
        const res = await h.post({ amount: 1 }, { 'x-payment': v1Header(network, payload) });
        assert.equal(res.status, 400, `${network}: ${res.text}`);
        assert.equal(res.body.error, 'PAYMENT_MISMATCH');
      }
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
      assert.equal((await rowsOf(payer)).length, 0);
    });

    test('a v1 payment signed on another chain id but naming base-sepolia fails verification; nothing moves', async () => {
      const payer = await h.payer(5n);
      const payload = await signEip3009({
        token: h.chain.usdc,
        chainId: 8453,
        domain: USDC_DOMAIN,
        from: payer,
        to: h.payTo.address,
        value: USD,
        validAfter: BigInt(Math.floor(Date.now() / 1000) - 600),
      });
      const res = await h.post({ amount: 1 }, { 'x-payment': v1Header('base-sepolia', payload) });
      assert.equal(res.status, 402, res.text);
      assert.equal(res.body.error, 'PAYMENT_REJECTED');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
      assert.equal(await h.balance(payer.address), 0);
    });

    test('amount changed: a v1 payment for $2 on a $5 top-up is refused; its value edited after signing fails verification', async () => {
      const payer = await h.payer(10n);
      const payload = await v1Usdc(payer, 2n * USD);
      const short = await h.post({ amount: 5 }, { 'x-payment': v1Header('base-sepolia', payload) });
      assert.equal(short.status, 400, short.text);
      assert.equal(short.body.error, 'PAYMENT_MISMATCH');
      const edited = { ...payload, authorization: { ...payload.authorization, value: String(5n * USD) } };
      const forged = await h.post({ amount: 5 }, { 'x-payment': v1Header('base-sepolia', edited) });
      assert.equal(forged.status, 402, forged.text);
      assert.equal(forged.body.error, 'PAYMENT_REJECTED');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD);
      assert.equal(await h.balance(payer.address), 0);
    });

    test('a Permit2 entry (USDT) forced into the v1 body: x402-fetch signs EIP-3009 for USDT, which the gateway refuses; no token moves', async () => {
      const payer = await h.payer(10n);
      // A man in the middle rewrites the v1 body: the v2 header's Permit2 entry, named the v1 way.
      const rewriting: typeof fetch = async (input, init) => {
        const res = await fetch(input, init);
        if (res.status !== 402 || (init?.headers as Record<string, string> | undefined)?.['X-PAYMENT']) return res;
        const v2 = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
        const usdt = v2.accepts.find((a) => a.extra?.assetTransferMethod === 'permit2')!;
        const forced = {
          ...usdt,
          network: 'base-sepolia',
          maxAmountRequired: usdt.amount,
          resource: v2.resource.url,
          description: 'x',
          mimeType: 'application/json',
        };
        return new Response(JSON.stringify({ x402Version: 1, error: 'PAYMENT_REQUIRED', accepts: [forced] }), { status: 402, headers: res.headers });
      };
      const signer = await createSigner('base-sepolia', payer.privateKey);
      const res = await wrapV1Fetch(
        rewriting,
        signer as never,
        10n * USD,
      )(`${h.gw.url}/v1/topup`, { method: 'POST', headers: json, body: JSON.stringify({ amount: 1 }) });
      assert.equal(res.status, 402, await res.clone().text());
      assert.equal((await res.json()).error, 'PAYMENT_REJECTED');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD);
      assert.equal(await h.balance(payer.address), 0);
    });
  });
}
