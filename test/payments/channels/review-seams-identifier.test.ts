import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { base64Json } from '../../support/x402-payloads.ts';
import { channelOf, channelPayer, channelSuite, paid } from './channel-harness.ts';
import { usdcChannelOffer } from './review-seams-setup.ts';

/**
 * A channel payment refused for carrying x402 `payment-identifier`, attacked with identifiers the
 * exact path calls malformed (too short, not a string): still the plain 400 naming the extension,
 * before the deposit is verified or made, and the same deposit without it opens the channel.
 */

const MALFORMED: [string, unknown][] = [
  ['too short', 'x'],
  ['not a string', 1234567890123456],
  ['null', null],
];

for (const engine of ENGINES) {
  describe(`attack: a channel deposit carrying a malformed payment-identifier (${engine})`, () => {
    const harness = channelSuite(engine);

    for (const [what, id] of MALFORMED) {
      test(`an identifier ${what}: a 400 naming the extension, no deposit made, the same payment without it served`, async () => {
        const h = harness();
        const account = await h.payer(10n);
        const offer = await usdcChannelOffer(h);
        const { payload } = await channelPayer(h, account).scheme.createPaymentPayload(2, offer);
        const envelope = { x402Version: 2, accepted: offer, payload };
        const calls = h.fake.received.length;
        const refused = await paid(h, base64Json({ ...envelope, extensions: { 'payment-identifier': { info: { required: false, id } } } }));
        assert.equal(refused.status, 400, refused.text.slice(0, 300));
        assert.match(refused.text, /payment-identifier/);
        assert.doesNotMatch(refused.text, /0x[0-9a-f]{64,}/i, 'no signature echoed');
        assert.equal(h.fake.received.length, calls, 'nothing ran');
        assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), 10n * USD, 'no deposit was made');
        assert.equal(await channelOf(h, account), undefined, 'no channel recorded');
        const served = await paid(h, base64Json(envelope));
        assert.equal(served.status, 200, served.text.slice(0, 300));
        await assertLedgerConsistent(h.gw.services.storage.db);
      });
    }
  });
}
