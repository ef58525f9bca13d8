import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { payPerRequestSuite } from '../../support/pay-per-request-harness.ts';
import { siweProof } from '../../support/siwe.ts';
import { USD } from '../../support/topup-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';

/**
 * The wallet's pay-per-request key (`x402 pay-per-request`) honours a spend limit its owner sets on it
 * (SECURITY.md, residual risks: "refused with a fresh offer, never after taking money without
 * crediting it"). An exact payment is settled and credited before the request reserves, so once the
 * limit is reached a paid request is credited and refused. The refusal must say why: the key's
 * limit, not a balance that "no longer covers" the request (it was just credited and covers it),
 * which sends the payer to sign payment after payment, each taken and refused the same way.
 */
const CENT = 10_000;
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

for (const engine of ENGINES) {
  describe(`the pay-per-request key's spend limit and a paid request (${engine})`, () => {
    const harness = payPerRequestSuite(engine);

    test("a paid request over the owner's limit on the pay-per-request key: credited, refused as KEY_LIMIT_EXCEEDED, not as a balance that does not cover it", async () => {
      const h = harness();
      const payer = await h.payer(10n);
      await h.openai(payer).chat.completions.create(BODY);
      const db = h.gw.services.storage.db;
      const pseudo = await db.selectFrom('api_keys').select('id').where('wallet', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();
      const limited = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${pseudo.id}`, { ...(await siweProof(payer)), spend_limit_usdc: 1 });
      assert.equal(limited.status, 200, limited.text);

      const offer = (await h.chat(BODY)).body.accepts[0];
      const before = await h.balance(payer.address);
      const calls = h.fake.received.length;
      const res = await h.chat(BODY, { 'payment-signature': v2Header(offer, await h.usdcPayment(payer, BigInt(CENT))) });
      assert.equal(res.status, 402, res.text);
      assert.equal(h.fake.received.length, calls, 'the request did not run');
      const balance = await h.balance(payer.address);
      assert.equal(balance, before + CENT, 'the payment was credited to the balance');
      assert.ok(balance >= Number(res.body.reserved_usdc), 'the balance covers the request');
      assert.equal(res.body.error, 'KEY_LIMIT_EXCEEDED', `refused for the key's limit, not the balance: ${res.text}`);
      assert.doesNotMatch(res.body.message, /no longer covers/);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD - 2n * BigInt(CENT));
      await assertLedgerAndChainAgree(db, h.gw.services.topup!.clientFor(h.chain.network)!, 2);
    });
  });
}
