import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { x402Client } from '@x402/fetch';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import type { PaymentRequirements } from '@x402/core/types';
import { ENGINES } from '../../support/engines.ts';
import { payPerRequestSuite } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';

/**
 * The gateway's local facilitator can settle `upto` (facilitator.test.ts), but no paid route offers
 * it unless the operator enables it (docs/DECISIONS.md, x402 `upto`): an `upto` payment signed by
 * the stock client for a request's price,
 * bound to the gateway's own relayer, is refused before verify or settle, and no money moves.
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };

for (const engine of ENGINES) {
  describe(`attack: an upto payment where only exact is offered (${engine})`, () => {
    const harness = payPerRequestSuite(engine);

    test('refused with PAYMENT_MISMATCH naming the scheme to use; nothing recorded, nothing moved on chain', async () => {
      const h = harness();
      const asked = await h.chat(BODY);
      assert.equal(asked.status, 402);
      const exact = (asked.body.accepts as PaymentRequirements[]).find((r) => r.asset.toLowerCase() === h.chain.usdt.toLowerCase())!;
      assert.ok(!(asked.body.accepts as PaymentRequirements[]).some((r) => r.scheme === 'upto'), 'upto is not offered');
      const payer = await h.payer(10n);
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const upto: PaymentRequirements = { ...exact, scheme: 'upto', extra: { ...exact.extra, facilitatorAddress: h.relayer.address } };
      const client = new x402Client().register('eip155:*', new UptoEvmScheme(payer));
      client.setSpendControls({ allowedAssets: [{ network: h.chain.network, asset: h.chain.usdt, maxAmountPerPayment: '10000000000' }] });
      const signed = await client.createPaymentPayload({ x402Version: 2, resource: asked.body.resource, accepts: [upto] });
      const res = await h.chat(BODY, { 'payment-signature': v2Header(upto, signed.payload) });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.error, 'PAYMENT_MISMATCH');
      assert.match(res.body.message, /scheme "upto" is not offered; use "exact"/);
      const rows = await h.gw.services.storage.db.selectFrom('payments').select('id').where('payer', '=', payer.address.toLowerCase()).execute();
      assert.equal(rows.length, 0, 'no payment was recorded');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD);
    });
  });
}
