import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { signPermit2, v2Header } from '../../support/x402-payloads.ts';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import { x402Client } from '@x402/fetch';
import { settledUpto, signedUptoHeader, UPTO_BODY, uptoOffersOf, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';

/**
 * Upto payments whose terms are not exactly an offered upto entry, each signed by the stock upto
 * client for the altered terms: refused with a 400 (or a 402 for a deadline too near) that says
 * what to sign, before anything is recorded, verified or sent. The facilitator-level attacks (a
 * witness for another relayer sent straight to the proxy, an amount above the maximum) are in
 * facilitator.test.ts.
 */
const BODY = UPTO_BODY;

async function untouched(h: PayPerRequestHarness, payer: FundedAccount) {
  assert.equal((await uptoPayments(h, payer)).length, 0, 'no upto payment recorded');
  const rows = await h.gw.services.storage.db.selectFrom('payments').select('id').where('payer', '=', payer.address.toLowerCase()).execute();
  assert.equal(rows.length, 0, 'nothing recorded');
  assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD);
  assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD);
  await assertLedgerConsistent(h.gw.services.storage.db);
}

async function refused(h: PayPerRequestHarness, payer: FundedAccount, header: string, status: number, code: string, message: RegExp, body: unknown = BODY) {
  const res = await h.chat(body, { 'payment-signature': header });
  assert.equal(res.status, status, res.text);
  assert.equal(res.body.error, code);
  assert.match(res.body.message, message);
  await untouched(h, payer);
}

for (const engine of ENGINES) {
  describe(`attack: upto payments that answer no upto offer (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('a witness bound to another facilitator', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const other = await h.chain.newAccount();
      const asked = await h.chat(BODY);
      const offer = uptoOffersOf(asked.body.accepts)[0]!;
      const { header } = await signedUptoHeader(h, payer, BODY, { extra: { ...offer.extra, facilitatorAddress: other.address } });
      await refused(h, payer, header, 400, 'PAYMENT_MISMATCH', /witness names facilitator .* not .* as the offer does/i);
    });

    test('a witness paying another recipient', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const other = await h.chain.newAccount();
      const { header } = await signedUptoHeader(h, payer, BODY, { payTo: other.address });
      await refused(h, payer, header, 400, 'PAYMENT_MISMATCH', /not to this gateway's payTo/);
    });

    test('a maximum below the offer (echoing the offer unchanged)', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const asked = await h.chat(BODY);
      const offer = uptoOffersOf(asked.body.accepts)[0]!;
      const lower: PaymentRequirements = { ...offer, amount: String(BigInt(offer.amount) - 1n) };
      const client = new x402Client().register('eip155:*', new UptoEvmScheme(payer));
      client.setSpendControls({ allowedAssets: [{ network: h.chain.network, asset: h.chain.usdt, maxAmountPerPayment: '10000000000' }] });
      const signed = await client.createPaymentPayload({ x402Version: 2, resource: asked.body.resource, accepts: [lower] });
      // The signed maximum is lower; the echoed requirement is the server's own.
      await refused(h, payer, v2Header(offer, signed.payload), 400, 'PAYMENT_MISMATCH', /maximum is \d+ units but this request's upto offer is exactly/);
      await refused(h, payer, v2Header(lower, signed.payload), 400, 'PAYMENT_MISMATCH', /units but/);
    });

    test('another asset (USDC through Permit2, which is offered by EIP-3009 only)', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await h.chain.approvePermit2(payer, h.chain.usdc);
      const asked = await h.chat(BODY);
      const offer = uptoOffersOf(asked.body.accepts)[0]!;
      const usdc: PaymentRequirements = { ...offer, asset: h.chain.usdc, extra: { ...offer.extra, name: 'USD Coin', version: '2' } };
      const client = new x402Client().register('eip155:*', new UptoEvmScheme(payer));
      client.setSpendControls({ allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '10000000000' }] });
      const signed = await client.createPaymentPayload({ x402Version: 2, resource: asked.body.resource, accepts: [usdc] });
      await refused(h, payer, v2Header(usdc, signed.payload), 400, 'PAYMENT_MISMATCH', /asset .* is not offered/);
    });

    test('a deadline too near for the request and its settle', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const { header } = await signedUptoHeader(h, payer, BODY, { maxTimeoutSeconds: 20 });
      await refused(h, payer, header, 402, 'PAYMENT_EXPIRED', /deadline is \d+ s away; the request and its settle need at least \d+ s/);
    });

    test('a deadline further ahead than the offer asked (a hand-rolled client)', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      // The offer's 300 s, plus the 300 s of clock slack, plus an hour.
      const { header } = await signedUptoHeader(h, payer, BODY, { maxTimeoutSeconds: 300 + 300 + 3600 });
      await refused(h, payer, header, 402, 'PAYMENT_REJECTED', /deadline is \d+ s away, beyond the 300 s this gateway offers/);
    });

    test("an exact payment under an upto payment's nonce is not answered as that payment", async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await uptoOpenAI(h, payer).chat.completions.create(BODY);
      const upto = await settledUpto(h, payer);
      const paidSoFar = await h.chain.balanceOf(h.chain.usdt, payer.address);
      const asked = await h.chat(BODY);
      const exact = (asked.body.accepts as PaymentRequirements[]).find((r) => r.scheme === 'exact' && r.asset.toLowerCase() === h.chain.usdt.toLowerCase())!;
      const payload = await signPermit2({
        token: h.chain.usdt,
        chainId: h.anvil.chainId,
        from: payer,
        to: h.payTo.address,
        amount: BigInt(exact.amount),
        nonce: BigInt(upto.nonce),
        deadline: BigInt(upto.valid_before),
      });
      const res = await h.chat(BODY, { 'payment-signature': v2Header(exact, payload) });
      assert.equal(res.status, 402, res.text);
      assert.equal(res.body.error, 'PAYMENT_REJECTED');
      assert.match(res.body.message, /belongs to an x402 upto payment/);
      assert.equal(await h.balance(payer.address), 0, 'nothing ran against, or was credited to, the payer');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), paidSoFar);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a payment signed for one body, sent with a costlier one', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const { header } = await signedUptoHeader(h, payer, BODY);
      await refused(h, payer, header, 400, 'PAYMENT_MISMATCH', /the payment is for \d+ units but/, { ...BODY, max_tokens: 4000 });
    });
  });
}
