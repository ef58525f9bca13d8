import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { CHAT_BODY, channelCharges, channelOf, channelPayer, channelSuite } from './channel-harness.ts';

/**
 * The gateway stops between a channel request's answer and its commit (the fail point
 * TOLLGATE_TEST_CHANNEL_FAILURE=stop-before-commit leaves the rows as a crash there does: the
 * request pending on the channel, its lease no longer renewed). What the restart does: nothing at
 * start-up; the channel answers busy until the lease runs out (leaseSeconds), then its next request,
 * on any instance, commits the stopped one first, with the charge its bill recorded, and runs.
 * The client, which read that charge in the receipt, goes on without a corrective 402.
 */
const LEASE_SECONDS = 1;

for (const engine of ENGINES) {
  describe(`attack: the gateway stops between a channel answer and its commit (${engine})`, () => {
    const harness = channelSuite(engine, {
      payPerRequest: { enabled: true, batchSettlement: { enabled: true, withdrawDelaySeconds: 900, leaseSeconds: LEASE_SECONDS } },
    });

    test('the served request is charged once, by the next request after the lease, and the session goes on', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      const first = await payer.openai.chat.completions.create(CHAT_BODY).withResponse();
      const c1 = Number(first.response.headers.get('x-tollgate-charged-usdc'));
      h.gw.services.failPoints.channelFailure = 'stop-before-commit';
      let c2: number;
      try {
        const second = await payer.openai.chat.completions.create({ ...CHAT_BODY, messages: [{ role: 'user', content: 'then stop' }] }).withResponse();
        c2 = Number(second.response.headers.get('x-tollgate-charged-usdc'));
        const receipt = decodePaymentResponseHeader(second.response.headers.get('payment-response')!);
        assert.equal((receipt.extra as { chargedAmount?: string }).chargedAmount, String(c2), 'the client was told its charge');
      } finally {
        h.gw.services.failPoints.channelFailure = null;
      }
      const stopped = (await channelOf(h, account))!;
      assert.equal(stopped.charged_usdc, c1, 'not committed: the process stopped first');
      assert.notEqual(stopped.pending_request, null);
      await assertLedgerConsistent(h.gw.services.storage.db);

      await new Promise((resolve) => setTimeout(resolve, LEASE_SECONDS * 1000 + 300));
      const third = await payer.openai.chat.completions.create({ ...CHAT_BODY, messages: [{ role: 'user', content: 'after the restart' }] }).withResponse();
      const c3 = Number(third.response.headers.get('x-tollgate-charged-usdc'));
      const after = (await channelOf(h, account))!;
      assert.equal(after.pending_request, null);
      assert.equal(after.charged_usdc, c1 + c2 + c3, 'the stopped request charged once, exactly its bill');
      assert.deepEqual(await channelCharges(h, after.channel_id), [c1, c2, c3]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
