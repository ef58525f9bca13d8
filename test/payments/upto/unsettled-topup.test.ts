import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { settledUpto, streamAndRevoke, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * docs/DECISIONS.md (x402 `upto`): a wallet whose upto payment could not be settled is
 * refused for every later payment (upto, exact, top-up: 403 UPTO_UNSETTLED) until tollgate admin
 * upto retry settles it or write-off records the loss. The attack: the same wallet, right after
 * revoking Permit2 to keep an answer unpaid, approves again and tops up through POST /v1/topup; if
 * only the pay-per-request entry checked, the payment would be credited to its own spendable
 * balance (API keys, SIWX) while its upto debt stays open, and the debt is never taken from it.
 */
for (const engine of ENGINES) {
  describe(`attack: a wallet with an unsettled upto payment still tops up (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('POST /v1/topup from the unsettled wallet is refused 403 UPTO_UNSETTLED like every other payment', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await streamAndRevoke(h, payer);
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'unsettled');
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const res = await h.topup(payer, 1, 'permit2');
      const text = await res.text();
      const credited = await h.balance(payer.address);
      await assertLedgerConsistent(h.gw.services.storage.db);
      assert.equal(
        res.status,
        403,
        `the unsettled wallet's top-up was answered ${res.status} and ${credited} micro-USDC credited to it, its upto debt ${row.settle_amount_atomic} still unsettled: ${text.slice(0, 200)}`,
      );
    });
  });
}
