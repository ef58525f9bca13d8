import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { proofQuery, siweProof, createKeyProof } from '../../support/siwe.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { signEip3009, v1Header } from '../../support/x402-payloads.ts';
import { USDC_DOMAIN } from '../../../src/devchain/deploy.ts';

for (const engine of ENGINES) {
  describe(`top-ups with the stock x402 clients (${engine})`, () => {
    let h: TopupHarness;
    before(async () => {
      h = await startTopupHarness(engine);
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    test('USDC by EIP-3009 through @x402/fetch: 200, receipt headers, and ledger = chain', async () => {
      const payer = await h.payer(20n);
      const before = await h.chain.balanceOf(h.chain.usdc, h.payTo.address);
      const res = await h.topup(payer, 12.5);
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal(body.credited_usdc, 12_500_000);
      assert.equal(body.balance_usdc, 12_500_000);
      assert.equal(body.available_usdc, 12_500_000);
      assert.equal(body.wallet, payer.address.toLowerCase());
      const receipt = decodePaymentResponseHeader(res.headers.get('payment-response')!);
      assert.equal(receipt.success, true);
      assert.equal(receipt.transaction, body.transaction);
      assert.equal(res.headers.get('x-payment-response'), res.headers.get('payment-response'));
      // The chain agrees: the payer paid exactly that, payTo received it, and the ledger credited it.
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 20n * USD - 12_500_000n);
      assert.equal((await h.chain.balanceOf(h.chain.usdc, h.payTo.address)) - before, 12_500_000n);
      assert.equal(await h.balance(payer.address), 12_500_000);
      const onChain = await h.chain.client(payer).getTransactionReceipt({ hash: body.transaction });
      assert.equal(onChain.status, 'success');
      await h.gw.assertLedger();
    });

    test('USDT by Permit2 through @x402/fetch after the payer approves Permit2', async () => {
      const payer = await h.payer(10n);
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const before = await h.chain.balanceOf(h.chain.usdt, h.payTo.address);
      const res = await h.topup(payer, 3, 'permit2');
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.equal(body.credited_usdc, 3_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 7n * USD);
      assert.equal((await h.chain.balanceOf(h.chain.usdt, h.payTo.address)) - before, 3n * USD);
      assert.equal(await h.balance(payer.address), 3_000_000);
      await h.gw.assertLedger();
    });

    test('a raw v1 X-Payment payload (network by name, no asset) is accepted', async () => {
      const payer = await h.payer(5n);
      const payload = await signEip3009({
        token: h.chain.usdc,
        chainId: h.anvil.chainId,
        domain: USDC_DOMAIN,
        from: payer,
        to: h.payTo.address,
        value: 2n * USD,
        validAfter: BigInt(Math.floor(Date.now() / 1000) - 600), // what v1 clients send
      });
      const res = await h.post({ amount: 2 }, { 'x-payment': v1Header('base-sepolia', payload) });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.credited_usdc, 2_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 3n * USD);
      assert.equal(await h.balance(payer.address), 2_000_000);
    });

    test('history lists credited top-ups with tx hashes, for the owner only', async () => {
      const payer = await h.payer(10n);
      const res = await h.topup(payer, 4);
      assert.equal(res.status, 200);
      const { transaction } = await res.json();
      const mine = await call(h.gw.url, 'GET', `/v1/topups/${payer.address}?${proofQuery(await siweProof(payer))}`);
      assert.equal(mine.status, 200, mine.text);
      assert.equal(mine.body.topups.length, 1);
      const [t] = mine.body.topups;
      assert.equal(t.status, 'credited');
      assert.equal(t.credited_usdc, 4_000_000);
      assert.equal(t.amount, '4000000');
      assert.equal(t.asset, h.chain.usdc.toLowerCase());
      assert.equal(t.network, h.chain.network);
      assert.equal(t.transaction, transaction);
      assert.match(t.created_at, /^\d{4}-\d\d-\d\dT/);

      // With an API key of the wallet too; another wallet's proof or key is refused.
      const key = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(payer));
      const byKey = await call(h.gw.url, 'GET', `/v1/topups/${payer.address}`, undefined, { authorization: `Bearer ${key.body.key}` });
      assert.equal(byKey.status, 200);
      assert.deepEqual(byKey.body.topups, mine.body.topups);
      const stranger = await h.payer(0n);
      const theirs = await call(h.gw.url, 'GET', `/v1/topups/${payer.address}?${proofQuery(await siweProof(stranger))}`);
      assert.equal(theirs.status, 401);
      assert.equal((await call(h.gw.url, 'GET', `/v1/topups/${payer.address}`)).status, 401);
      assert.equal((await call(h.gw.url, 'GET', '/v1/topups/0x1234')).status, 400);
    });
  });
}

describe('the 402 offer', () => {
  let h: TopupHarness;
  before(async () => {
    h = await startTopupHarness('sqlite');
  });
  after(() => h.stop());

  test('body and PAYMENT-REQUIRED carry the same v2 offer, amounts in token units', async () => {
    const res = await h.post({ amount: 5.25 });
    assert.equal(res.status, 402);
    assert.equal(res.body.x402Version, 2);
    assert.equal(res.body.error, 'PAYMENT_REQUIRED');
    assert.equal(res.body.resource.url, 'http://gateway.test/v1/topup');
    const header = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
    const { message: _m, ...offer } = res.body;
    assert.deepEqual(header, offer);
    assert.equal(res.body.accepts.length, 2);
    const [usdc, usdt] = res.body.accepts;
    assert.deepEqual(usdc, {
      scheme: 'exact',
      network: h.chain.network,
      amount: '5250000',
      maxAmountRequired: '5250000',
      asset: h.chain.usdc,
      payTo: h.payTo.address,
      maxTimeoutSeconds: 300,
      extra: { assetTransferMethod: 'eip3009', name: 'USD Coin', version: '2', decimals: 6 },
    });
    assert.equal(usdt.extra.assetTransferMethod, 'permit2');
    assert.equal(usdt.asset, h.chain.usdt);
  });

  test('bad amounts are 400 before any 402', async () => {
    for (const body of [{ amount: 0.5 }, { amount: 10_001 }, { amount: 1.0000001 }, { amount: '5' }, {}, { amount: null }, { amount: -3 }]) {
      const res = await h.post(body);
      assert.equal(res.status, 400, `${JSON.stringify(body)} → ${res.status}`);
      assert.equal(res.body.error, 'VALIDATION_ERROR');
      assert.equal(res.headers.get('payment-required'), null);
    }
    const notJson = await fetch(`${h.gw.url}/v1/topup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"amount": 5' });
    assert.equal(notJson.status, 400);
  });

  test('CORS lets a browser read PAYMENT-REQUIRED and send PAYMENT-SIGNATURE', async () => {
    const preflight = await fetch(`${h.gw.url}/v1/topup`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type,payment-signature' },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), '*');
    const allowed = preflight.headers.get('access-control-allow-headers')!.toLowerCase();
    for (const name of ['payment-signature', 'x-payment', 'access-control-expose-headers', 'authorization']) assert.ok(allowed.includes(name), name);
    const res = await fetch(`${h.gw.url}/v1/topup`, {
      method: 'POST',
      headers: { origin: 'https://app.example', 'content-type': 'application/json' },
      body: '{"amount": 1}',
    });
    const exposed = res.headers.get('access-control-expose-headers')!.toLowerCase();
    for (const name of ['payment-required', 'payment-response', 'x-payment-response']) assert.ok(exposed.includes(name), name);
  });

  test('a gateway without offers says top-ups are not configured', async () => {
    const { startTestGateway } = await import('../../support/gateway.ts');
    const bare = await startTestGateway({ engine: 'sqlite' });
    try {
      const res = await call(bare.url, 'POST', '/v1/topup', { amount: 5 });
      assert.equal(res.status, 503);
      assert.equal(res.body.error, 'TOPUP_UNAVAILABLE');
    } finally {
      await bare.stop();
    }
  });
});
