import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PERMIT2_ADDRESS } from '@x402/evm';
import { erc20Abi } from 'viem';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { checkLedger } from '../../../src/ledger/invariants.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { settledUpto, signedUptoHeader, streamThen, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * The settle moves the charge, never the signed maximum, so it needs the payer to cover the charge
 * only. @x402/evm's own settle simulated a transfer of the maximum first: a payer whose balance or
 * Permit2 allowance dropped below the maximum during the request (spending elsewhere while a
 * stream runs; a Permit2 approval set to what they mean to spend) was recorded unsettled and
 * locked out although the chain would have moved the charge. A large max_tokens makes the maximum
 * far above the charge (payPerRequest.minUsd lowered so the floor does not lift the charge to it).
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 4000 };

const send = async (h: PayPerRequestHarness, payer: FundedAccount, functionName: 'transfer' | 'approve', to: `0x${string}`, amount: bigint) => {
  const wallet = h.chain.client(payer);
  const hash = await wallet.writeContract({ address: h.chain.usdt, abi: erc20Abi, functionName, args: [to, amount], account: payer, chain: wallet.chain });
  await wallet.waitForTransactionReceipt({ hash });
};

/** Streams one upto request and, once its maximum is held and before its charge is settled, runs `meanwhile` with that maximum. */
const streamWhile = (h: PayPerRequestHarness, payer: FundedAccount, meanwhile: (maxAtomic: bigint) => Promise<void>) =>
  streamThen(h, payer, BODY, async () => meanwhile(BigInt((await uptoPayments(h, payer)).at(-1)!.amount_atomic)));

async function chainAgrees(h: PayPerRequestHarness) {
  await assertLedgerConsistent(h.gw.services.storage.db);
  const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
  assert.deepEqual(audit.problems, [], 'ledger-check --chain');
}

for (const engine of ENGINES) {
  describe(`upto: the settle needs the charge, not the maximum (${engine})`, () => {
    // The background reconciler runs once, at start-up: this test runs its passes itself.
    const harness = uptoSuite(engine, { payPerRequest: { enabled: true, upto: true, minUsd: 0.0001 }, topup: { reconcileIntervalSeconds: 3600 } });

    test('balance lowered below the maximum but above the charge before the settle: settled, the chain moved the charge', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const sink = await h.chain.newAccount();
      let max = 0n;
      await streamWhile(h, payer, async (maxAtomic) => {
        max = maxAtomic;
        // Spent elsewhere: what is left covers the charge (at most 10% of the maximum here), not the maximum.
        await send(h, payer, 'transfer', sink.address, 10n * USD - maxAtomic / 2n);
      });
      const row = await settledUpto(h, payer);
      const charge = BigInt(row.settle_amount_atomic!);
      assert.ok(charge > 0n && charge < max / 2n, `charge ${charge}, maximum ${max}`);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), max / 2n - charge, 'exactly the charge left the payer');
      await chainAgrees(h);
    });

    test('Permit2 allowance lowered below the maximum but above the charge: settled', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await streamWhile(h, payer, async (maxAtomic) => {
        // A Tether-like token changes a non-zero allowance only through 0.
        await send(h, payer, 'approve', PERMIT2_ADDRESS, 0n);
        await send(h, payer, 'approve', PERMIT2_ADDRESS, maxAtomic / 2n);
      });
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(row.settle_amount_atomic!));
      await chainAgrees(h);
    });

    test('attack: balance below the charge: unsettled, and the refusal says what restores the wallet; restored, it is collected by itself', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const sink = await h.chain.newAccount();
      await streamWhile(h, payer, async () => send(h, payer, 'transfer', sink.address, 10n * USD));
      const row = await settledUpto(h, payer);
      assert.equal(row.upto_state, 'unsettled');
      assert.match(row.failure_reason!, /permit2_insufficient_balance/);
      const ledger = await checkLedger(h.gw.services.storage.db);
      assert.ok(
        ledger.findings.some((f) => f.includes(`upto payment ${row.id}`)),
        'ledger-check lists it',
      );

      // The payer learns exactly what restores the wallet: the charge, the token, Permit2, the deadline.
      await send(h, sink, 'transfer', payer.address, 10n * USD);
      const refused = await h.chat(BODY, { 'payment-signature': (await signedUptoHeader(h, payer, BODY)).header });
      assert.equal(refused.status, 403, refused.text);
      assert.equal(refused.body.error, 'UPTO_UNSETTLED');
      const units = row.settle_amount_atomic!;
      assert.match(refused.body.message, new RegExp(`Hold at least [0-9.]+ \\(${units} token units\\) of token ${h.chain.usdt} on ${h.chain.network}`));
      assert.match(refused.body.message, new RegExp(`approve Permit2 \\(${PERMIT2_ADDRESS}\\) for at least that much`));
      assert.match(refused.body.message, new RegExp(`before ${new Date(row.valid_before * 1000).toISOString()}`));
      assert.match(refused.body.message, /settles it again by itself within about 3605 s/);

      // It was restored (the funds are back): the reconciler's next pass collects the charge and frees the wallet.
      await h.gw.services.storage.db
        .updateTable('payments')
        .set({ updated_at: Date.now() - 60_000 })
        .where('id', '=', row.id)
        .execute();
      await h.gw.services.topup!.reconcile();
      const collected = (await uptoPayments(h, payer)).at(-1)!;
      assert.equal(collected.upto_state, 'settled', collected.failure_reason ?? '');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(units));
      const next = await uptoOpenAI(h, payer).chat.completions.create(BODY);
      assert.match(next.choices[0]!.message.content!, /fake provider/, 'the wallet is free');
      await settledUpto(h, payer);
      await chainAgrees(h);
    });
  });
}
