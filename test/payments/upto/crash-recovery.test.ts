import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { FacilitatorUnavailable, type Facilitator } from '../../../src/payments/facilitator/facilitator.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { settledUpto, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';

/**
 * A gateway that stops in the middle of an upto settle leaves a `settling` row: the charge and the
 * payload always, the transaction's hash if it was broadcast (recorded before). The reconciler
 * (run at start-up and on its timer) finishes it from the chain, against the charge and never the
 * signed maximum, and never sends a second transaction for a settle that was sent. The stop is
 * reproduced on the live gateway by wrapping its real facilitator: the settle throws before the
 * send, or after the send and before the arrival is written.
 */
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

/**
 * One upto JSON request by the stock clients with the gateway's upto settle replaced by `settle`
 * (given the real facilitator), waited for until that settle has stopped; returns the charge.
 */
async function paidWithStop(
  h: PayPerRequestHarness,
  payer: FundedAccount,
  settle: (real: Facilitator, ...args: Parameters<Facilitator['settle']>) => ReturnType<Facilitator['settle']>,
): Promise<number> {
  const upto = h.gw.services.topup!.upto;
  const real = upto.facilitator;
  let stopped!: () => void;
  const stop = new Promise<void>((resolve) => (stopped = resolve));
  upto.facilitator = { ...real, settle: (...args) => settle(real, ...args).finally(() => setTimeout(stopped, 50)) };
  try {
    const { response } = await uptoOpenAI(h, payer).chat.completions.create(BODY).withResponse();
    // The settle runs after the answer: wait until the stand-in "process" stopped in it.
    await stop;
    return Number(response.headers.get('x-tollgate-charged-usdc'));
  } finally {
    upto.facilitator = real;
  }
}

/** As if the process stopped a while ago: the reconciler takes over rows untouched for the settle wait. */
async function afterRestart(h: PayPerRequestHarness, id: string) {
  await h.gw.services.storage.db
    .updateTable('payments')
    .set({ updated_at: Date.now() - 60_000 })
    .where('id', '=', id)
    .execute();
  await h.gw.services.topup!.reconcile();
}

const relayerNonce = (h: PayPerRequestHarness) => h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, 'latest']).then(Number);

for (const engine of ENGINES) {
  describe(`upto: a stop between the chain and the database (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('stopped after the broadcast, before the arrival was written: finished from the receipt, nothing sent again', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const charged = await paidWithStop(h, payer, async (real, ...args) => {
        await real.settle(...args);
        throw new Error('the process stopped here');
      });
      const [row] = await uptoPayments(h, payer);
      assert.equal(row!.upto_state, 'settling');
      assert.match(row!.tx_hash!, /^0x/, 'the hash was recorded before the broadcast');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(charged), 'the charge is on chain');
      const nonce = await relayerNonce(h);
      await afterRestart(h, row!.id);
      await afterRestart(h, row!.id);
      const done = await settledUpto(h, payer);
      assert.equal(done.upto_state, 'settled');
      assert.equal(done.tx_hash, row!.tx_hash);
      assert.equal(done.onchain_amount_atomic, String(charged));
      assert.equal(await relayerNonce(h), nonce, 'no second transaction');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(charged), 'settled once');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('stopped after the charge was fixed, before the send: the reconciler sends that amount once', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      const charged = await paidWithStop(h, payer, async () => {
        throw new FacilitatorUnavailable('the process stopped here');
      });
      const [row] = await uptoPayments(h, payer);
      assert.equal(row!.upto_state, 'settling');
      assert.equal(row!.tx_hash, null);
      assert.equal(row!.settle_amount_atomic, String(charged));
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD);
      await afterRestart(h, row!.id);
      const done = await settledUpto(h, payer);
      assert.equal(done.upto_state, 'settled', done.failure_reason ?? '');
      const nonce = await relayerNonce(h);
      await afterRestart(h, row!.id);
      assert.equal(await relayerNonce(h), nonce, 'a settled payment is not sent again');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(charged), 'exactly the charge, once');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
