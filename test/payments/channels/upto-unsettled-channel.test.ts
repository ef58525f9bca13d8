import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { payPerRequestSuite } from '../../support/pay-per-request-harness.ts';
import { settledUpto, streamAndRevoke, uptoPayer } from '../../support/upto-pay-per-request.ts';
import { CHAT_BODY, channelOf, channelPayer } from './channel-harness.ts';

/**
 * A wallet whose upto payment could not be settled is refused every later payment (upto, exact
 * pay-per-request, POST /v1/topup: 403 UPTO_UNSETTLED) until the operator retries or writes it off
 * (SECURITY.md 1.11). A batch-settlement channel payment is a payment too, and it was never asked:
 * the wallet that had just kept an answer unpaid opened a channel and went on buying inference.
 */
describe('attack: a wallet with an unsettled upto payment pays through a batch-settlement channel (sqlite)', () => {
  const harness = payPerRequestSuite('sqlite', {
    config: { payPerRequest: { enabled: true, upto: true, batchSettlement: { enabled: true, withdrawDelaySeconds: 900, minDepositUsd: 1 } } },
  });

  test("the unsettled wallet's channel deposit is refused 403 UPTO_UNSETTLED before any deposit is made", { timeout: 120_000 }, async () => {
    const h = harness();
    const payer = await uptoPayer(h);
    await streamAndRevoke(h, payer);
    const row = await settledUpto(h, payer);
    assert.equal(row.upto_state, 'unsettled');
    const before = await h.chain.balanceOf(h.chain.usdc, payer.address);
    const res = await channelPayer(h, payer).fetch(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(CHAT_BODY),
    });
    const text = await res.text();
    assert.equal(res.status, 403, text);
    assert.match(text, /UPTO_UNSETTLED/);
    assert.match(text, new RegExp(row.id));
    assert.equal(await channelOf(h, payer), undefined, 'no channel recorded');
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), before, "the payer's tokens stayed in its wallet");
    await assertLedgerConsistent(h.gw.services.storage.db);
  });
});
