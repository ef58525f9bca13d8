import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { PERMIT2_ADDRESS } from '@x402/evm';
import { erc20Abi, parseGwei, toBytes, toHex } from 'viem';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { findPayment } from '../../../src/payments/payment-store.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { settledUpto, signedUptoHeader, UPTO_BODY, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * Two ways a payer can try to be served and not pay: sign a new upto authorization under a Permit2
 * nonce the gateway already settled (the chain would refuse its settle after the answer), and take
 * the Permit2 allowance away in the very block the settle is mined in (the simulation passed, the
 * transaction reverts). Neither may leave a free answer unaccounted, a second charge, or the
 * payment lost: the first is refused before anything runs, the second is recorded unsettled (the
 * payer refused) and collected, once, when the allowance is back.
 */
const relayerNonce = (h: PayPerRequestHarness) => h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']).then(Number);

/** The stock client's signature for `body`, under the Permit2 nonce `nonce` (its random source pinned while it signs). */
async function signedUnderNonce(h: PayPerRequestHarness, payer: FundedAccount, body: unknown, nonce: bigint) {
  const real = globalThis.crypto.getRandomValues.bind(globalThis.crypto);
  const pinned = toBytes(toHex(nonce, { size: 32 }));
  globalThis.crypto.getRandomValues = (<T extends ArrayBufferView | null>(array: T): T => {
    if (array instanceof Uint8Array && array.length === 32) array.set(pinned);
    else real(array as Uint8Array);
    return array;
  }) as typeof globalThis.crypto.getRandomValues;
  try {
    return await signedUptoHeader(h, payer, body);
  } finally {
    globalThis.crypto.getRandomValues = real;
  }
}

async function chainAgrees(h: PayPerRequestHarness) {
  await assertLedgerConsistent(h.gw.services.storage.db);
  const audit = await auditCreditsOnChain(h.gw.services.storage.db, () => h.gw.services.topup!.clientFor(h.chain.network));
  assert.deepEqual(audit.problems, [], 'ledger-check --chain');
}

for (const engine of ENGINES) {
  describe(`attack: an upto payer who tries not to pay (${engine})`, () => {
    const harness = uptoSuite(engine, { topup: { settleWaitSeconds: 2, reconcileIntervalSeconds: 3600 } });
    let anvil: PayPerRequestHarness['anvil'] | undefined;
    after(async () => anvil?.rpc('evm_setAutomine', [true]));

    test('a new authorization (another body, another maximum) under the Permit2 nonce of a settled one: refused before it runs', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
      const first = await settledUpto(h, payer);
      assert.equal(first.upto_state, 'settled');
      const paid = await h.chain.balanceOf(h.chain.usdt, payer.address);
      const calls = h.fake.received.length;
      const nonce = await relayerNonce(h);
      const body = { ...UPTO_BODY, max_tokens: 300 };
      const { header } = await signedUnderNonce(h, payer, body, BigInt(first.nonce));
      const signed = JSON.parse(Buffer.from(header, 'base64').toString()) as { payload: { permit2Authorization: { nonce: string } } };
      assert.equal(BigInt(signed.payload.permit2Authorization.nonce), BigInt(first.nonce), 'signed under the settled nonce');
      const res = await h.chat(body, { 'payment-signature': header });
      assert.equal(res.status, 402, res.text);
      assert.equal(res.body.error, 'PAYMENT_REJECTED', res.text);
      // Permit2 refuses a spent nonce: the verify's simulation of the maximum fails.
      assert.equal(res.body.reason, 'permit2_simulation_failed');
      assert.equal(h.fake.received.length, calls, 'the provider was not called');
      assert.equal((await uptoPayments(h, payer)).length, 1, 'nothing more recorded');
      assert.equal(await relayerNonce(h), nonce, 'nothing sent');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), paid);
      await chainAgrees(h);
    });

    test('the allowance revoked in the block that mines the settle: unsettled, the payer refused; restored, collected once', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const wallet = h.chain.client(payer);
      await h.anvil.rpc('evm_setAutomine', [false]);
      let rowId: string;
      try {
        await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
        await until(async () => Boolean((await uptoPayments(h, payer)).at(-1)?.tx_hash), 'the settle was signed', 20_000);
        rowId = (await uptoPayments(h, payer)).at(-1)!.id;
        // The hash is recorded before the broadcast: the block below must find the settle in the pool.
        const settleHash = (await uptoPayments(h, payer)).at(-1)!.tx_hash;
        await until(async () => (await h.anvil.rpc('eth_getTransactionByHash', [settleHash])) !== null, 'the settle was broadcast', 20_000);
        // The front-run: a higher tip puts the revocation first in the block.
        const revoke = await wallet.writeContract({
          address: h.chain.usdt,
          abi: erc20Abi,
          functionName: 'approve',
          args: [PERMIT2_ADDRESS, 0n],
          account: payer,
          chain: wallet.chain,
          maxPriorityFeePerGas: parseGwei('50'),
          maxFeePerGas: parseGwei('200'),
        });
        await h.anvil.rpc('evm_mine', []);
        assert.equal((await wallet.waitForTransactionReceipt({ hash: revoke })).status, 'success');
      } finally {
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      const db = h.gw.services.storage.db;
      const sent = await findPayment(db, rowId);
      const receipt = await h.anvil.rpc<{ status: string }>('eth_getTransactionReceipt', [sent.tx_hash]);
      assert.equal(receipt.status, '0x0', 'the settle reverted');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD, 'nothing moved');
      await until(async () => (await findPayment(db, rowId)).upto_state !== 'holding', 'the charge fixed', 10_000);
      await new Promise((resolve) => setTimeout(resolve, 2_500));

      const age = () =>
        db
          .updateTable('payments')
          .set({ updated_at: Date.now() - 60_000 })
          .where('id', '=', rowId)
          .execute();
      await age();
      await h.gw.services.topup!.reconcile();
      const refused = await findPayment(db, rowId);
      assert.equal(refused.upto_state, 'unsettled', `${refused.upto_state}: ${refused.failure_reason}`);
      assert.match(refused.failure_reason!, /permit2_allowance_required/);
      // Not served meanwhile (with no allowance, a new upto payment already fails its verify).
      const calls = h.fake.received.length;
      const next = await h.chat(UPTO_BODY, { 'payment-signature': (await signedUptoHeader(h, payer, UPTO_BODY)).header });
      assert.ok(next.status === 402 || next.status === 403, next.text);
      assert.equal(h.fake.received.length, calls, 'not served');

      await h.chain.approvePermit2(payer, h.chain.usdt);
      await age();
      await h.gw.services.topup!.reconcile();
      await age();
      await h.gw.services.topup!.reconcile();
      const done = await findPayment(db, rowId);
      assert.equal(done.upto_state, 'settled', `${done.upto_state}: ${done.failure_reason}`);
      assert.equal(done.onchain_amount_atomic, done.settle_amount_atomic);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(done.settle_amount_atomic!), 'the charge, once');
      await chainAgrees(h);
    });
  });
}
