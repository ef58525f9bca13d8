import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { uptoProblems } from '../../../src/ledger/upto-check.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import {
  revokePermit2,
  sentButUnmined,
  settledUpto,
  UPTO_BODY,
  uptoClient,
  uptoOffersOf,
  uptoPayer,
  uptoPayments,
  uptoSuite,
} from '../../support/upto-pay-per-request.ts';
import { until } from '../../support/until.ts';
import { reconcileUpto } from '../../../src/payments/upto/reconcile-upto.ts';

/**
 * attack: an upto authorization signed with a deadline beyond what a JavaScript Date can hold. A
 * deadline further ahead than the offer's maxTimeoutSeconds is refused at admission, so this needs
 * an operator who offers one that far (topup.maxTimeoutSeconds), and the stock client signs it. The
 * payer's unsettled payment, or its settle stuck in the pool, must still be refused and reported as
 * any other: the refusal and ledger-check write the deadline as a date.
 */
const FAR = 9_000_000_000_000; // seconds ahead: past 8.64e12 s, the last instant a Date holds

async function farHeader(h: PayPerRequestHarness, payer: FundedAccount, body: unknown): Promise<string> {
  const asked = await h.chat(body);
  assert.equal(asked.status, 402, asked.text);
  const offer = uptoOffersOf(asked.body.accepts as PaymentRequirements[])[0]!;
  const signed = await uptoClient(h, payer).createPaymentPayload({
    x402Version: 2,
    resource: asked.body.resource,
    accepts: [offer],
  });
  return v2Header(offer, signed.payload);
}

for (const engine of ENGINES) {
  describe(`attack: an upto deadline past the last date (${engine})`, () => {
    const harness = uptoSuite(engine, { topup: { settleWaitSeconds: 2, reconcileIntervalSeconds: 3600, maxTimeoutSeconds: FAR } });
    let restore: (() => Promise<unknown>) | undefined;
    after(async () => restore?.());

    test("unsettled: the payer's next payment is refused 403 UPTO_UNSETTLED, not a 500", async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const streamed = { ...UPTO_BODY, stream: true };
      const header = await farHeader(h, payer, streamed);
      h.fake.behaviour = { chunkDelayMs: 300 };
      try {
        const res = await fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'payment-signature': header },
          body: JSON.stringify(streamed),
        });
        assert.equal(res.status, 200, await res.clone().text());
        const reader = res.body!.getReader();
        await reader.read();
        await revokePermit2(h, payer);
        while (!(await reader.read()).done);
      } finally {
        h.fake.behaviour = {};
      }
      // The request path's settle may leave it settling (a refused send); a reconciler pass decides from the chain.
      await until(async () => (await uptoPayments(h, payer)).at(-1)?.upto_state !== 'holding', 'the charge is fixed', 20_000);
      const logger = { info() {}, warn() {} };
      const deps = { ...h.gw.services.topup!.upto, countUnsettled: () => {}, logger, now: Date.now, staleMs: 0 };
      await until(
        async () => {
          await reconcileUpto(deps);
          return (await uptoPayments(h, payer)).at(-1)?.upto_state === 'unsettled';
        },
        'the settle is refused for the revoked allowance',
        20_000,
      );
      const row = (await uptoPayments(h, payer)).at(-1)!;
      assert.equal(row.upto_state, 'unsettled', row.failure_reason ?? '');
      assert.ok(row.valid_before > FAR, 'the far deadline was taken');
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const next = await h.chat(UPTO_BODY, { 'payment-signature': await farHeader(h, payer, UPTO_BODY) });
      assert.equal(next.status, 403, next.text);
      assert.equal(next.body.error, 'UPTO_UNSETTLED');
      assert.match(next.body.message, new RegExp(`upto payment ${row.id}`));
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('its settle stuck in the pool for 10 minutes: ledger-check reports it, and does not crash', async () => {
      const h = harness();
      restore = () => h.anvil.rpc('evm_setAutomine', [true]);
      const payer = await uptoPayer(h);
      await h.anvil.rpc('evm_setAutomine', [false]);
      try {
        const answered = await h.chat(UPTO_BODY, { 'payment-signature': await farHeader(h, payer, UPTO_BODY) });
        assert.equal(answered.status, 200, answered.text);
        const row = await sentButUnmined(h, payer);
        assert.equal(row.upto_state, 'settling');
        const check = await uptoProblems(h.gw.services.storage.db, Date.now() + 11 * 60_000);
        assert.deepEqual(check.problems, []);
        assert.ok(
          check.findings.some((f) => f.includes(`upto payment ${row.id}`) && /settling since/.test(f)),
          check.findings.join('\n'),
        );
      } finally {
        await h.anvil.rpc('evm_mine');
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      const row = await settledUpto(h, payer).catch(() => undefined);
      if (row?.upto_state !== 'settled') {
        // The reconciler is slowed down in this suite: finish the row as a pass would.
        const logger = { info() {}, warn() {} };
        await reconcileUpto({ ...h.gw.services.topup!.upto, countUnsettled: () => {}, logger, now: Date.now, staleMs: 0 });
      }
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
