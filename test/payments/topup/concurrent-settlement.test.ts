import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { rpcProxy, type RpcProxyState } from '../../support/rpc-proxy.ts';
import { devChain, startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { signEip3009, v2Header } from '../../support/x402-payloads.ts';

/**
 * One relayer settling many payments at once. Each settlement is a transaction from the
 * relayer's key; unserialized, overlapping sends take the same nonce and all but one are
 * refused by the node, which the payers saw as PAYMENT_REJECTED ("sign a new payment"). The chain
 * is anvil with automine; the gateway reaches it through a proxy that can answer like a lagging
 * RPC node.
 */
for (const engine of ENGINES) {
  describe(`concurrent settlements from one relayer (${engine})`, () => {
    let h: TopupHarness;
    let proxy: Awaited<ReturnType<typeof rpcProxy>>;
    const rpc: RpcProxyState = { up: true };
    let usdcOffer: PaymentRequirements;
    before(async () => {
      const { anvil } = await devChain();
      proxy = await rpcProxy(anvil.rpcUrl, rpc);
      h = await startTopupHarness(engine, { config: { chains: { [String(anvil.chainId)]: { rpcUrl: proxy.url } }, topup: { settleWaitSeconds: 2 } } });
      usdcOffer = (await h.post({ amount: 5 })).body.accepts[0];
    });
    after(async () => {
      await h.anvil.rpc('evm_setAutomine', [true]);
      await h?.stop();
      await proxy?.close();
    });

    const agree = (atLeast: number) => assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, atLeast);
    const creditedRows = async (payer: FundedAccount) =>
      (await h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute()).map((p) => p.status);
    const signedPayment = async (payer: FundedAccount) =>
      v2Header(
        usdcOffer,
        await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
      );

    test('6 wallets top up $1 at once by EIP-3009 with the stock client: all credited once', async () => {
      const payers = await h.payers(6, 10n);
      const results = await Promise.all(
        payers.map(async (p) => {
          const res = await h.topup(p, 1);
          return { status: res.status, body: await res.text() };
        }),
      );
      for (const r of results) assert.equal(r.status, 200, r.body);
      for (const p of payers) {
        assert.equal(await h.balance(p.address), 1_000_000);
        assert.equal(await h.chain.balanceOf(h.chain.usdc, p.address), 9n * USD);
        assert.deepEqual(await creditedRows(p), ['credited']);
      }
      await agree(6);
    });

    test('6 wallets at once, EIP-3009 (USDC) and Permit2 (USDT) mixed: all credited once', async () => {
      const payers = await h.payers(6, 10n);
      const method = (i: number): 'eip3009' | 'permit2' => (i % 2 ? 'permit2' : 'eip3009');
      for (const [i, p] of payers.entries()) if (method(i) === 'permit2') await h.chain.approvePermit2(p, h.chain.usdt);
      const results = await Promise.all(
        payers.map(async (p, i) => {
          const res = await h.topup(p, 1, method(i));
          return { status: res.status, body: await res.text() };
        }),
      );
      for (const r of results) assert.equal(r.status, 200, r.body);
      for (const [i, p] of payers.entries()) {
        assert.equal(await h.balance(p.address), 1_000_000);
        assert.equal(await h.chain.balanceOf(method(i) === 'permit2' ? h.chain.usdt : h.chain.usdc, p.address), 9n * USD);
      }
      await agree(12);
    });

    test('one wallet sends eight payments at once: all eight credited', async () => {
      const payer = await h.payer(10n);
      const statuses = await Promise.all(Array.from({ length: 8 }, async () => (await h.topup(payer, 1)).status));
      assert.deepEqual(statuses, Array(8).fill(200));
      assert.equal(await h.balance(payer.address), 8_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 2n * USD);
      await agree(20);
    });

    test('a send the node refuses for its nonce is a 503 with Retry-After; the same payment, sent again, is credited', async () => {
      const payer = await h.payer(10n);
      const header = await signedPayment(payer);
      // The gateway's next nonce read is answered from an old block, as a lagging RPC node does:
      // anvil then refuses the transaction with its real "nonce too low" error.
      rpc.staleNonceReads = 1;
      const refused = await h.post({ amount: 5 }, { 'payment-signature': header });
      rpc.staleNonceReads = 0;
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.error, 'FACILITATOR_UNAVAILABLE');
      assert.match(refused.body.message, /nonce too low.*send the same payment again/i);
      assert.ok(Number(refused.headers.get('retry-after')) > 0);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD, 'nothing was settled');

      const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(retry.status, 200, retry.text);
      assert.equal(retry.body.credited_usdc, 5_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
      assert.deepEqual(await creditedRows(payer), ['credited']);
      await agree(21);
    });

    test('the relayer out of gas money is a 503, not a rejection; once refilled the same payment is credited', async () => {
      const payer = await h.payer(10n);
      const header = await signedPayment(payer);
      const gas = await h.anvil.rpc('eth_getBalance', [h.relayer.address, 'latest']);
      await h.anvil.rpc('anvil_setBalance', [h.relayer.address, '0x0']);
      const gauge = async () => {
        const text = await h.gw.services.metrics.registry.metrics();
        return Number(new RegExp(`tollgate_relayer_native_balance\\{network="${h.chain.network}"\\} (\\S+)`).exec(text)?.[1]);
      };
      let refused;
      try {
        assert.equal(await gauge(), 0, 'the gauge operators watch shows the empty relayer');
        refused = await h.post({ amount: 5 }, { 'payment-signature': header });
      } finally {
        await h.anvil.rpc('anvil_setBalance', [h.relayer.address, gas]);
      }
      assert.equal(refused.status, 503, refused.text);
      assert.match(refused.body.message, /gas/);
      assert.ok((await gauge()) > 0);
      assert.ok(Number(refused.headers.get('retry-after')) > 0);
      const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(retry.status, 200, retry.text);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
      await agree(22);
    });

    test('a settlement dropped from the mempool is released, and the same payment sent again is credited once', async () => {
      const payer = await h.payer(10n);
      const header = await signedPayment(payer);
      await h.anvil.rpc('evm_setAutomine', [false]);
      let pending;
      try {
        pending = await h.post({ amount: 5 }, { 'payment-signature': header });
        assert.equal(pending.status, 202, pending.text);
        assert.equal(await h.anvil.rpc('anvil_dropTransaction', [pending.body.transaction]), pending.body.transaction);
      } finally {
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      // The settle wait (2 s) has passed since it was sent: long enough for any node to have shown it.
      const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.equal(retry.status, 200, retry.text);
      assert.equal(retry.body.credited_usdc, 5_000_000);
      // Sent again under the same nonce (the pending count is back where it was), with the same
      // calldata and fees, it may well be the very same transaction: re-broadcast, now mined.
      const receipt = await h.anvil.rpc('eth_getTransactionReceipt', [retry.body.transaction]);
      assert.equal((receipt as { status: string }).status, '0x1');
      const again = await h.post({ amount: 5 }, { 'payment-signature': header });
      assert.deepEqual(again.body, retry.body);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
      assert.equal(await h.balance(payer.address), 5_000_000);
      await agree(23);
    });

    test('a settlement that sits unmined is sent again at a higher fee under its nonce, and credited once', async () => {
      const payer = await h.payer(10n);
      const header = await signedPayment(payer);
      const row = () => h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();
      await h.anvil.rpc('evm_setAutomine', [false]);
      let stuck: string;
      try {
        const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
        assert.equal(pending.status, 202, pending.text);
        stuck = pending.body.transaction;
        const tx = (hash: string) => h.anvil.rpc<{ nonce: string; maxFeePerGas: string }>('eth_getTransactionByHash', [hash]);
        const was = await tx(stuck);
        // The settle wait (2 s) has passed since it was sent: the reconciler replaces it.
        await h.gw.services.topup!.reconcile();
        const replaced = await row();
        assert.equal(replaced.status, 'submitted', JSON.stringify(replaced));
        assert.notEqual(replaced.tx_hash, stuck, 'sent again under a new hash');
        const now = await tx(replaced.tx_hash!);
        assert.equal(now.nonce, was.nonce, 'under the same nonce');
        assert.ok(BigInt(now.maxFeePerGas) > BigInt(was.maxFeePerGas), 'at a higher fee');
        await h.anvil.rpc('evm_mine');
      } finally {
        await h.anvil.rpc('evm_setAutomine', [true]);
      }
      await h.gw.services.topup!.reconcile();
      const credited = await row();
      assert.equal(credited.status, 'credited');
      assert.equal(await h.anvil.rpc('eth_getTransactionReceipt', [stuck]), null, 'the stuck transaction was never mined');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD, 'paid once');
      assert.equal(await h.balance(payer.address), 5_000_000);
      await agree(24);
    });
  });
}
