import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { decodePaymentSignatureHeader } from '@x402/core/http';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { CHAT_BODY, CHANNEL_CONFIG, channelPayer, channelSuite, openedChannel, paid, voucherHeader } from './channel-harness.ts';

/**
 * Anyone can name a payer's channel: its config is the payer's address, the gateway's receiver and
 * the stock client's salt, all public. A payload the payer did not sign was refused only after it
 * had taken the channel's lease, which it held while the facilitator was asked about it: every
 * request of the payer's own meanwhile got the busy 402, which the stock client does not retry. A
 * stranger sending such payloads without pause kept the payer's requests turned away. Now a payload
 * whose EOA authorizer did not sign it is refused before the lease (the facilitator is never asked).
 */
for (const engine of ENGINES) {
  describe(`attack: a stranger's payloads on a payer's channel hold its lease (${engine})`, () => {
    // freshSeconds 1: a voucher after a pause is checked by the facilitator, with the lease held.
    const batchSettlement = { ...CHANNEL_CONFIG.payPerRequest.batchSettlement, freshSeconds: 1 };
    const harness = channelSuite(engine, { payPerRequest: { ...CHANNEL_CONFIG.payPerRequest, batchSettlement } });

    test("a stranger's voucher stalled at the facilitator: the payer's own request still runs, the stranger's is refused and ran nothing", async () => {
      const h = harness();
      const payer = await openedChannel(h);
      await new Promise((r) => setTimeout(r, 1_100));
      const stranger = privateKeyToAccount(generatePrivateKey());
      // "charged + ceiling", as the payer would sign it, but signed by the stranger.
      const foreign = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling, { signer: stranger });
      const foreignSignature = (decodePaymentSignatureHeader(foreign.header).payload as { voucher: { signature: string } }).voucher.signature;

      const facilitator = h.gw.services.topup!.facilitator as { verify: (...a: unknown[]) => Promise<unknown> };
      const realVerify = facilitator.verify;
      let stalled = false;
      let release = () => {};
      const gate = new Promise<void>((r) => {
        release = r;
      });
      facilitator.verify = async (...a: unknown[]) => {
        const signature = (a[0] as { payload?: { voucher?: { signature?: string } } }).payload?.voucher?.signature;
        if (signature === foreignSignature) {
          stalled = true;
          await gate;
        }
        return realVerify.apply(facilitator, a);
      };
      try {
        const calls = h.fake.received.length;
        const foreignAnswer = paid(h, foreign.header);
        // Until the stranger's payload is refused, or is held at the facilitator with the lease taken.
        const settled = await Promise.race([foreignAnswer.then(() => 'answered'), new Promise((r) => setTimeout(r, 1_500)).then(() => 'waiting')]);
        let own: { status: number; detail: string };
        try {
          const answer = await channelPayer(h, payer).openai.chat.completions.create(CHAT_BODY);
          own = { status: 200, detail: answer.choices[0]?.message.content ?? '' };
        } catch (err) {
          own = { status: (err as { status?: number }).status ?? -1, detail: String((err as Error).message).slice(0, 200) };
        }
        release();
        const refused = await foreignAnswer;
        assert.equal(
          own.status,
          200,
          `the payer's own request was turned away (${own.status}: ${own.detail}) while the stranger's payload was ${settled} (held at the facilitator: ${stalled})`,
        );
        assert.equal(refused.status, 402);
        assert.equal(decodePaymentRequiredHeader(refused.headers.get('payment-required')!).error, 'PAYMENT_REJECTED');
        assert.match(refused.text, /invalid_batch_settlement_evm_voucher_signature: the voucher is not signed by the channel's payer authorizer/);
        assert.equal(stalled, false, 'the facilitator was never asked about a payload the payer did not sign');
        assert.equal(h.fake.received.length, calls + 1, "only the payer's request reached the provider");
      } finally {
        release();
        facilitator.verify = realVerify;
      }
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
