import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import type { Facilitator } from '../../../src/payments/facilitator/facilitator.ts';
import { findPayment } from '../../../src/payments/payment-store.ts';
import { relayerLockFor } from '../../../src/payments/relayer/relayer-lock.ts';
import { createFacilitator } from '../../../src/payments/service.ts';
import { reconcileUpto } from '../../../src/payments/upto/reconcile-upto.ts';
import { ENGINES } from '../../support/engines.ts';
import type { Engine } from '../../../src/storage/database.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { UPTO_BODY, uptoOpenAI, uptoPayer, uptoPayments, uptoSuite } from '../../support/upto-pay-per-request.ts';
import { gethLikeRpc } from './upto-setup.ts';

/**
 * The request path sends its settle without taking the send claim (upto-store.ts, claimSend) that
 * the reconciler takes. When its send waits longer than the settle wait (topup.settleWaitSeconds,
 * the reconciler's staleMs) before it reaches the chain (the relayer's send queue and cross-instance
 * lock, a slow RPC), another instance's reconciler finds the row `settling` with no hash, takes the
 * claim and sends the charge; the waiting request path then sends it as well. Blocks are not instant
 * (automine off, as on any real chain), so both simulations pass and both transactions go out: one
 * pays, the other reverts on Permit2's nonce, at the relayer's expense. Both instances reach the
 * chain through an RPC that estimates gas as geth and op-geth do (against the latest block): anvil's
 * own estimate, against its pending state, would hide the second send.
 */
const quiet = { info() {}, warn() {} };
const SETTLE_WAIT_SECONDS = 2;

const relayerNonce = (h: PayPerRequestHarness, tag: 'latest' | 'pending' = 'latest') =>
  h.anvil.rpc<string>('eth_getTransactionCount', [h.relayer.address, tag]).then(Number);

/** A facilitator of another instance on the same database and relayer key, its RPC geth-like, with the shared send lock. */
async function instance(h: PayPerRequestHarness, engine: Engine) {
  const proxy = await gethLikeRpc(h.anvil.rpcUrl);
  const id = String(h.anvil.chainId);
  const config = { ...h.gw.config, chains: { ...h.gw.config.chains, [id]: { ...h.gw.config.chains[id]!, rpcUrl: proxy.url } } };
  return { facilitator: createFacilitator(config, relayerLockFor(engine, h.gw.services.storage.db, 10_000)), proxy };
}

/**
 * The live gateway's upto settle (its request path, settle-upto.ts) held at its start, as a send
 * waiting on the relayer, until `release()`, then sent through `real` (instance A's facilitator).
 */
function holdRequestPathSettle(h: PayPerRequestHarness, real: Facilitator) {
  const upto = h.gw.services.topup!.upto;
  const own = upto.facilitator;
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let reached!: () => void;
  const waiting = new Promise<void>((resolve) => (reached = resolve));
  let finished!: () => void;
  const done = new Promise<void>((resolve) => (finished = resolve));
  upto.facilitator = {
    ...real,
    settle: async (...args: Parameters<Facilitator['settle']>) => {
      reached();
      await gate;
      try {
        return await real.settle(...args);
      } finally {
        finished();
      }
    },
  };
  return { waiting, release, done, restore: () => void (upto.facilitator = own) };
}

for (const engine of ENGINES) {
  describe(`attack: one upto settle sent by the request path and by another instance's reconciler (${engine})`, () => {
    const harness = uptoSuite(engine, { topup: { settleWaitSeconds: SETTLE_WAIT_SECONDS, reconcileIntervalSeconds: 3600 } });
    let anvil: PayPerRequestHarness['anvil'] | undefined;
    after(async () => anvil?.rpc('evm_setAutomine', [true]));

    test('the request path, held past the settle wait before its send, and a second instance finishing the row: one transaction', async () => {
      const h = harness();
      anvil = h.anvil;
      const payer = await uptoPayer(h);
      const a = await instance(h, engine);
      const b = await instance(h, engine);
      const held = holdRequestPathSettle(h, a.facilitator);
      const db = h.gw.services.storage.db;
      const nonce = await relayerNonce(h);
      let answered: Promise<unknown> | undefined;
      try {
        answered = uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY);
        await held.waiting;
        const [row] = await uptoPayments(h, payer);
        assert.equal(row!.upto_state, 'settling');
        assert.equal(row!.tx_hash, null, 'the request path has not sent yet');
        // Longer than the settle wait: B's reconciler takes the row as abandoned.
        await new Promise((resolve) => setTimeout(resolve, (SETTLE_WAIT_SECONDS + 0.5) * 1000));
        await h.anvil.rpc('evm_setAutomine', [false]);
        await reconcileUpto({ ...h.gw.services.topup!.upto, facilitator: b.facilitator, logger: quiet, now: Date.now, staleMs: SETTLE_WAIT_SECONDS * 1000 });
        assert.equal(await relayerNonce(h, 'pending'), nonce + 1, "B's reconciler sent the charge");
        held.release();
        await held.done;
        await answered;
        const sent = (await relayerNonce(h, 'pending')) - nonce;
        await h.anvil.rpc('evm_mine', []);
        await h.anvil.rpc('evm_setAutomine', [true]);

        // Whatever was sent, the books must end right: settled once for the charge.
        await db
          .updateTable('payments')
          .set({ updated_at: Date.now() - 60_000 })
          .where('id', '=', row!.id)
          .execute();
        await h.gw.services.topup!.reconcile();
        await until(async () => (await findPayment(db, row!.id)).upto_state === 'settled', 'settled', 10_000);
        const done = await findPayment(db, row!.id);
        assert.equal(done.onchain_amount_atomic, done.settle_amount_atomic);
        assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(done.settle_amount_atomic!), 'the charge, once');
        await assertLedgerConsistent(db);
        const audit = await auditCreditsOnChain(db, () => h.gw.services.topup!.clientFor(h.chain.network));
        assert.deepEqual(audit.problems, [], 'ledger-check --chain');
        assert.equal(sent, 1, `settle transactions the relayer sent for one authorization: ${sent}`);
      } finally {
        held.release();
        held.restore();
        await answered?.catch(() => undefined);
        await h.anvil.rpc('evm_setAutomine', [true]);
        await a.proxy.close();
        await b.proxy.close();
      }
    });
  });
}
