import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { freePort } from '../../../src/devchain/ports.ts';
import { call, startTestGateway } from '../../support/gateway.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { base64Json, signEip3009, v2Header, type Eip3009Terms } from '../../support/x402-payloads.ts';

const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
const CENT = 10_000;

describe('pay-per-request: the 402 offer and the failure matrix of top-ups (sqlite)', () => {
  let h: PayPerRequestHarness;
  let offer: PaymentRequirements;
  before(async () => {
    h = await startPayPerRequestHarness('sqlite');
    offer = (await h.chat(BODY)).body.accepts[0];
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const usdcPayment = (payer: FundedAccount, over: Partial<Eip3009Terms> = {}) => h.usdcPayment(payer, BigInt(CENT), over);

  /** Runs `attempt` and proves it moved no token, credited nothing and reached no provider. */
  async function nothingHappens(payer: FundedAccount, attempt: () => Promise<void>) {
    const calls = h.fake.received.length;
    const before = await h.chain.balanceOf(h.chain.usdc, payer.address);
    await attempt();
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), before, 'tokens moved');
    assert.equal(await h.balance(payer.address), 0, 'something was credited');
    assert.equal(h.fake.received.length, calls, 'the provider was called');
    await h.gw.assertLedger();
  }

  test('no Authorization: 402 with an x402 v2 offer for the reservation rounded up to minUsd, in body and header', async () => {
    const res = await h.chat(BODY);
    assert.equal(res.status, 402, res.text);
    assert.equal(res.body.x402Version, 2);
    assert.equal(res.body.error, 'PAYMENT_REQUIRED');
    assert.equal(res.body.resource.url, `${h.gw.config.server.publicUrl}/v1/chat/completions`);
    assert.ok(res.body.reserved_usdc > 0 && res.body.reserved_usdc < CENT);
    assert.equal(res.body.required_usdc, CENT);
    assert.deepEqual(
      res.body.accepts.map((a: PaymentRequirements) => [a.amount, (a as any).maxAmountRequired, a.extra?.assetTransferMethod]),
      [
        [String(CENT), String(CENT), 'eip3009'],
        [String(CENT), String(CENT), 'permit2'],
      ],
    );
    const header = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
    assert.deepEqual(header.accepts, res.body.accepts);
    // A bigger request is offered at the next whole cent above its reservation.
    const big = await h.chat({ ...BODY, max_tokens: 4096, n: 2 });
    assert.equal(big.status, 402);
    assert.equal(big.body.required_usdc, Math.ceil(big.body.reserved_usdc / CENT) * CENT);
    assert.ok(big.body.required_usdc > CENT);
  });

  test('a streaming request gets the same plain JSON 402, before any event', async () => {
    const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...BODY, stream: true }),
    });
    assert.equal(res.status, 402);
    assert.match(res.headers.get('content-type')!, /^application\/json/);
    assert.equal((await res.json()).error, 'PAYMENT_REQUIRED');
  });

  test('an invalid request is 400, never an offer, even with a payment attached', async () => {
    const payer = await h.payer(1n);
    const header = v2Header(offer, await usdcPayment(payer));
    await nothingHappens(payer, async () => {
      for (const body of [
        { ...BODY, model: 'fake/no-such-model' },
        { ...BODY, max_tokens: 1_000_000 },
        { ...BODY, messages: [] },
        { ...BODY, surprise_field: 1 },
      ]) {
        for (const headers of [{}, { 'payment-signature': header }] as Record<string, string>[]) {
          const res = await h.chat(body, headers);
          assert.equal(res.status, 400, res.text);
          assert.equal(res.body.error, 'VALIDATION_ERROR');
          assert.equal(res.headers.get('payment-required'), null);
        }
      }
    });
  });

  test('undecodable and mismatched payments are 400 INVALID_PAYMENT / PAYMENT_MISMATCH', async () => {
    const payer = await h.payer(1n);
    const stranger = await h.payer(0n);
    await nothingHappens(payer, async () => {
      for (const header of ['%%% not base64 %%%', base64Json({ hello: 'world' })]) {
        const res = await h.chat(BODY, { 'payment-signature': header });
        assert.equal(res.status, 400, res.text);
        assert.equal(res.body.error, 'INVALID_PAYMENT');
      }
      const cases: Array<[string, PaymentRequirements, unknown]> = [
        ['signed payTo differs', offer, await usdcPayment(payer, { to: stranger.address })],
        ['echoed payTo differs', { ...offer, payTo: stranger.address }, await usdcPayment(payer, { to: stranger.address })],
        ['echoed amount differs from the signed one', { ...offer, amount: String(2 * CENT) }, await usdcPayment(payer)],
        ['another network', { ...offer, network: 'eip155:1' }, await usdcPayment(payer)],
      ];
      for (const [name, accepted, payload] of cases) {
        const res = await h.chat(BODY, { 'payment-signature': v2Header(accepted, payload) });
        assert.equal(res.status, 400, `${name}: ${res.text}`);
        assert.equal(res.body.error, 'PAYMENT_MISMATCH', name);
      }
    });
  });

  /** 402 PAYMENT_REJECTED with a fresh offer, and the request did not run. */
  function assertRejected(res: Awaited<ReturnType<PayPerRequestHarness['chat']>>, name: string) {
    assert.equal(res.status, 402, `${name}: ${res.text}`);
    assert.equal(res.body.error, 'PAYMENT_REJECTED', name);
    assert.equal(res.body.accepts.length, 2, name);
    assert.ok(res.headers.get('payment-required'), name);
  }

  test('a signature by another key, an expired authorization, a payer without funds: 402 PAYMENT_REJECTED, no inference', async () => {
    const payer = await h.payer(1n);
    const thief = await h.payer(0n);
    await nothingHappens(payer, async () => {
      assertRejected(await h.chat(BODY, { 'payment-signature': v2Header(offer, await usdcPayment(payer, { signer: thief })) }), 'forged');
      const expired = await usdcPayment(payer, { validBefore: BigInt(Math.floor(Date.now() / 1000) - 10) });
      assertRejected(await h.chat(BODY, { 'payment-signature': v2Header(offer, expired) }), 'expired');
    });
    const poor = await h.payer(0n);
    await nothingHappens(poor, async () => {
      assertRejected(await h.chat(BODY, { 'payment-signature': v2Header(offer, await usdcPayment(poor)) }), 'no funds');
    });
  });

  test('a streaming request with a rejected payment is a plain 402, not a stream', async () => {
    const payer = await h.payer(1n);
    const thief = await h.payer(0n);
    await nothingHappens(payer, async () => {
      const res = await h.chat({ ...BODY, stream: true }, { 'payment-signature': v2Header(offer, await usdcPayment(payer, { signer: thief })) });
      assertRejected(res, 'stream');
      assert.match(res.headers.get('content-type')!, /^application\/json/);
    });
  });

  test('a payment below the price is 402 PAYMENT_INSUFFICIENT and nothing is settled', async () => {
    const payer = await h.payer(1n);
    await nothingHappens(payer, async () => {
      const half = await usdcPayment(payer, { value: BigInt(CENT / 2) });
      const res = await h.chat(BODY, { 'payment-signature': v2Header({ ...offer, amount: String(CENT / 2) }, half) });
      assert.equal(res.status, 402, res.text);
      assert.equal(res.body.error, 'PAYMENT_INSUFFICIENT');
      assert.equal(res.body.paid_usdc, CENT / 2);
      const rows = await h.gw.services.storage.db.selectFrom('payments').select('id').where('payer', '=', payer.address.toLowerCase()).execute();
      assert.equal(rows.length, 0, 'the payment was recorded');
    });
  });

  test('no payment header, signature or relayer key reaches the logs or a response', async () => {
    const payer = await h.payer(1n);
    const payload = await usdcPayment(payer);
    const header = v2Header(offer, payload);
    const bodies = [
      (await h.chat(BODY, { 'payment-signature': header })).text,
      (await h.chat({ ...BODY, model: 'x/y' }, { 'payment-signature': header })).text,
    ];
    const logs = h.gw.logs();
    for (const secret of [header.slice(0, 40), payload.signature.slice(2, 42), h.relayer.privateKey.slice(2)]) {
      assert.ok(!logs.includes(secret), 'a secret reached the logs');
      for (const body of bodies) assert.ok(!body.includes(secret), 'a secret reached a response');
    }
  });
});

describe('pay-per-request when it is off or the chain is down', () => {
  test('off (the default): a request without Authorization is 401, as before', async () => {
    const gw = await startTestGateway({ engine: 'sqlite' });
    try {
      const res = await call(gw.url, 'POST', '/v1/chat/completions', BODY);
      assert.equal(res.status, 401, res.text);
      assert.equal(res.headers.get('payment-required'), null);
    } finally {
      await gw.stop();
    }
  });

  test('RPC down: 503 FACILITATOR_UNAVAILABLE, no inference, and the same payment works once it is back', async () => {
    const h = await startPayPerRequestHarness('sqlite');
    const deadPort = await freePort();
    const down = await startTestGateway({
      engine: 'sqlite',
      env: h.env,
      config: {
        ...h.gatewayConfig,
        chains: { [String(h.anvil.chainId)]: { rpcUrl: `http://127.0.0.1:${deadPort}` } },
        providers: { fake: { baseUrl: h.fake.url }, other: { baseUrl: h.fake.url } },
        models: h.gw.config.models,
        payPerRequest: { enabled: true },
      },
    });
    try {
      const payer = await h.payer(1n);
      const offer = await call(down.url, 'POST', '/v1/chat/completions', BODY);
      assert.equal(offer.status, 402, offer.text);
      const header = v2Header(
        offer.body.accepts[0],
        await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: BigInt(CENT) }),
      );
      for (const stream of [false, true]) {
        const res = await call(down.url, 'POST', '/v1/chat/completions', { ...BODY, stream }, { 'payment-signature': header });
        assert.equal(res.status, 503, res.text);
        assert.equal(res.body.error, 'FACILITATOR_UNAVAILABLE');
      }
      assert.equal(h.fake.received.length, 0, 'the provider was called');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 1n * USD);
      await down.assertLedger();
      const ok = await h.chat(BODY, { 'payment-signature': header });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(h.fake.received.length, 1);
      await h.gw.assertLedger();
    } finally {
      await down.stop();
      await h.stop();
    }
  });
});
