import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { generatePaymentId } from '@x402/extensions/payment-identifier';
import { ENGINES } from '../../support/engines.ts';
import { exactUsdcClient, payingWithIdentifier } from '../../support/identified-payments.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { CHAT_BODY, channelOf, channelPayer, channelSuite, openedChannel, paid, voucherHeader } from './channel-harness.ts';

/**
 * Channels against x402 `payment-identifier` (the idempotency key the 402 advertises for exact and
 * upto). A channel request is not made idempotent by it: the stock client answers the corrective
 * 402 of a retried voucher by signing the next one, so a retry would run and be charged again. A
 * channel payment carrying an identifier is therefore refused (400 naming the extension) before
 * anything is verified or moved, rather than taken with a promise the gateway does not keep.
 */

const post = (fetcher: typeof fetch, h: PayPerRequestHarness) =>
  fetcher(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(CHAT_BODY) });

/** `header` (a base64 v2 payment) with a payment-identifier in its extensions. */
function withIdentifier(header: string, id: string): string {
  const envelope = JSON.parse(Buffer.from(header, 'base64').toString());
  envelope.extensions = { 'payment-identifier': { info: { required: false, id } } };
  return Buffer.from(JSON.stringify(envelope)).toString('base64');
}

function assertRefusedForIdentifier(answer: { status: number; text: string }) {
  assert.equal(answer.status, 400, answer.text.slice(0, 300));
  assert.match(answer.text, /payment-identifier/);
  assert.match(answer.text, /batch-settlement/);
}

for (const engine of ENGINES) {
  describe(`attack: batch-settlement channels and payment-identifier (${engine})`, () => {
    const harness = channelSuite(engine);

    test('the stock channel client adding a payment-identifier is refused before its deposit; without it the channel opens', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const calls = h.fake.received.length;
      const refused = await post(payingWithIdentifier(channelPayer(h, account).client, generatePaymentId()), h);
      assertRefusedForIdentifier({ status: refused.status, text: await refused.text() });
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), 10n * USD, 'no deposit was made');
      assert.equal(await channelOf(h, account), undefined, 'no channel recorded');
      const served = await post(channelPayer(h, account).fetch, h);
      assert.equal(served.status, 200, await served.text());
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test("an exact payment's identifier reused on a channel voucher is refused; the exact identifier still answers 409", async () => {
      const h = harness();
      const payer = await openedChannel(h);
      const id = generatePaymentId();
      const exact = await post(payingWithIdentifier(exactUsdcClient(h, payer), id), h);
      assert.equal(exact.status, 200, await exact.text());
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      const before = (await channelOf(h, payer))!;
      const calls = h.fake.received.length;
      assertRefusedForIdentifier(await paid(h, withIdentifier(v.header, id)));
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal((await channelOf(h, payer))!.charged_usdc, before.charged_usdc, 'nothing charged');
      const exactRetry = await post(payingWithIdentifier(exactUsdcClient(h, payer), id), h);
      assert.equal(exactRetry.status, 409, 'the identifier still names the exact request');
      const served = await paid(h, v.header);
      assert.equal(served.status, 200, served.text);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
