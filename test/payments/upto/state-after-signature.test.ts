import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { settledUpto, streamAndRevoke, UPTO_BODY, uptoClient, uptoOffersOf, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * The open-upto refusals (admission.ts, openUptoRefusal) are answered from the payer the header
 * *names*, before anything checks that the payer signed it: payWithUpto calls openUptoOf before the
 * facilitator's verify, and the exact entry calls it before settleMatched. So anyone, with no
 * signature of the victim, learns from a forged header whether a wallet has an upto request running
 * (409 UPTO_BUSY) or an unpaid one (403 UPTO_UNSETTLED), its payment id, its charge and why the
 * settle failed: state GET /v1/topups/:wallet only shows to the wallet's owner.
 */
for (const engine of ENGINES) {
  describe(`attack: a forged header reads another wallet's upto state (${engine})`, () => {
    const harness = uptoSuite(engine);

    test("a header naming the victim but signed by someone else learns nothing of the victim's upto payment", async () => {
      const h = harness();
      const victim = await uptoPayer(h);
      await streamAndRevoke(h, victim);
      const row = await settledUpto(h, victim);
      assert.equal(row.upto_state, 'unsettled');

      const attacker = await uptoPayer(h);
      const asked = await h.chat(UPTO_BODY);
      const accepts = asked.body.accepts as PaymentRequirements[];

      // upto: the attacker signs with its own key and names the victim as `from`.
      const offer = uptoOffersOf(accepts)[0]!;
      const signed = await uptoClient(h, attacker).createPaymentPayload({ x402Version: 2, resource: asked.body.resource, accepts: [offer] });
      const forged = structuredClone(signed.payload) as { permit2Authorization: { from: string } };
      forged.permit2Authorization.from = victim.address;
      const viaUpto = await h.chat(UPTO_BODY, { 'payment-signature': v2Header(offer, forged) });

      // exact (USDC, EIP-3009): signed by the attacker, naming the victim.
      const exact = accepts.find((r) => r.scheme === 'exact' && r.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
      const auth = await h.usdcPayment(attacker, BigInt(exact.amount));
      const forgedExact = { ...auth, authorization: { ...auth.authorization, from: victim.address } };
      const viaExact = await h.chat(UPTO_BODY, { 'payment-signature': v2Header(exact, forgedExact) });

      await assertLedgerConsistent(h.gw.services.storage.db);
      const leaks = [
        ['upto', viaUpto],
        ['exact', viaExact],
      ]
        .filter(([, res]) => (res as typeof viaUpto).text.includes(row.id))
        .map(([label, res]) => `${label as string}: ${(res as typeof viaUpto).status} ${(res as typeof viaUpto).text.slice(0, 220)}`);
      assert.deepEqual(leaks, [], "headers the victim never signed were answered with the victim's upto payment");
    });
  });
}
