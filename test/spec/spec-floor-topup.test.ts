import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTopupHarness, USD, type TopupHarness, usdcAuthorization } from '../support/topup-harness.ts';
import { v2Header } from '../support/x402-payloads.ts';

/** Spec 4.3, 2.5 and 7 for POST /v1/topup, with the stock offers (USDC by EIP-3009, USDT by Permit2). */
describe('spec floor: POST /v1/topup', () => {
  let h: TopupHarness;
  before(async () => {
    h = await startTopupHarness('sqlite');
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  test('4.3 step 1 / 2.5: the minimum (1 USD) is accepted: 402 {accepts} of exact entries, amounts = USD x 1e6', async () => {
    const res = await h.post({ amount: 1 });
    assert.equal(res.status, 402, res.text);
    assert.ok(Array.isArray(res.body.accepts) && res.body.accepts.length > 0);
    for (const r of res.body.accepts) {
      assert.equal(r.scheme, 'exact');
      assert.match(r.network, /^eip155:\d+$/);
      assert.equal(r.amount, '1000000');
      assert.equal(r.maxAmountRequired, '1000000');
      assert.equal(typeof r.asset, 'string');
      assert.equal(typeof r.payTo, 'string');
      assert.ok(['eip3009', 'permit2'].includes(r.extra.assetTransferMethod));
      assert.equal(typeof r.extra.name, 'string');
      assert.equal(typeof r.extra.version, 'string');
      assert.ok(Number.isInteger(r.extra.decimals));
    }
  });

  test('4.3 rule 1 / 7: below the minimum is 400 VALIDATION_ERROR before any 402, with or without X-Payment', async () => {
    for (const headers of [{}, { 'x-payment': 'bm90LWEtcGF5bWVudA==' }] as Record<string, string>[]) {
      const res = await h.post({ amount: 0.99 }, headers);
      assert.equal(res.status, 400, res.text);
      assert.equal(res.body.error, 'VALIDATION_ERROR');
      assert.equal(typeof res.body.message, 'string');
    }
  });

  test('4.3 step 2: the same body plus X-Payment (base64 payment) answers {balance_usdc, credited_usdc} integers', async () => {
    const payer = await h.payer(5n);
    const offer = (await h.post({ amount: 2 })).body.accepts.find((o: any) => o.extra.assetTransferMethod === 'eip3009');
    const payload = await usdcAuthorization(h, payer, 2n * USD);
    const res = await h.post({ amount: 2 }, { 'x-payment': v2Header(offer, payload) });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.credited_usdc, 2_000_000);
    assert.equal(res.body.balance_usdc, 2_000_000);
    assert.ok(Number.isInteger(res.body.balance_usdc) && Number.isInteger(res.body.credited_usdc));
  });

  test('4.3 rule 3 / 7 exception 1: an undecodable or mismatched payment is a 4xx client error (clients match on status)', async () => {
    const bad = await h.post({ amount: 2 }, { 'x-payment': '%%%not-base64%%%' });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(typeof bad.body.error, 'string');
    const payer = await h.payer(5n);
    const offer = (await h.post({ amount: 2 })).body.accepts.find((o: any) => o.extra.assetTransferMethod === 'eip3009');
    const payload = await usdcAuthorization(h, payer, 2n * USD);
    const mismatch = await h.post({ amount: 3 }, { 'x-payment': v2Header(offer, payload) });
    assert.ok(mismatch.status === 400 || mismatch.status === 402, mismatch.text);
    assert.equal(typeof mismatch.body.error, 'string');
    assert.equal(await h.balance(payer.address), 0);
  });
});
