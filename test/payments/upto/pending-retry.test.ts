import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { x402ResourceServer } from '@x402/core/server';
import type { PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types';
import type { Hex } from 'viem';
import { USD } from '../../support/topup-harness.ts';
import { gethLikeRpc, uptoSetup } from './upto-setup.ts';
import type { RunningProxy } from '../../support/rpc-proxy.ts';

/**
 * `tollgate facilitator` now serves `upto`, whose only callers are resource servers that are not
 * Tollgate gateways (no paid route takes upto). The stock x402ResourceServer answers a
 * `settlement_pending` result (receipt not seen in time) by calling /settle once more with the same
 * payload, trusting the facilitator's PendingSettlementStore to wait on the transaction already sent
 * (@x402/core settleWithPendingRetry). Tollgate switched that store off (remembersNothing, which is
 * right for its own gateways, which record the hash in their database). So the retry verifies again,
 * and while the first transaction is still in the pool it sends a second one: the relayer pays gas
 * for a transaction that can only revert, and the resource server is told the payment failed while
 * the payer was charged.
 */
describe('attack: upto settle retried after settlement_pending (stock resource server, tollgate facilitator)', () => {
  let anvilRef: { rpc(m: string, p?: unknown[]): Promise<unknown> } | undefined;
  after(async () => {
    await anvilRef?.rpc('evm_setAutomine', [true]);
  });

  let proxy: RunningProxy | undefined;
  after(async () => proxy?.close());
  const gethLike = async (anvilUrl: string) => {
    proxy = await gethLikeRpc(anvilUrl);
    return proxy.url;
  };

  for (const [label, rpcUrl] of [
    ['anvil', undefined],
    ['a geth-like node', gethLike],
  ] as const)
    test(`(${label}) the retry neither sends a second transaction nor reports failure for a payment that went through`, async () => {
      const s = await uptoSetup({ confirmationTimeoutMs: 3_000, rpcUrl });
      anvilRef = s.anvil;
      const accepted = s.requirements(500_000n);
      const payload = await s.sign(s.payer, accepted);
      const charge: PaymentRequirements = { ...accepted, amount: '200000' };
      const before = await s.nonces(s.relayer.address);
      const payToBefore = await s.balance(s.payTo.address);

      const fromBlock = BigInt((await s.anvil.rpc('eth_blockNumber')) as string);
      // A slow chain: nothing is mined until we say so.
      await s.anvil.rpc('evm_setAutomine', [false]);
      // The stock resource server's own settle-with-retry, pointed at Tollgate's facilitator. The first
      // call's receipt wait times out with the transaction still in the pool; the block holding it comes
      // 1 s into the retry (time enough for a retry that sends again to have sent), so the payment has
      // gone through before the answer, and "success" is the true answer. (Mined only after the answer,
      // no facilitator could truthfully say success.)
      let calls = 0;
      const client = {
        settle: async (p: PaymentPayload, r: PaymentRequirements) => {
          const answer = s.facilitator.settle(p, r);
          if (++calls === 2) {
            await new Promise((resolve) => setTimeout(resolve, 1_000));
            await s.anvil.rpc('evm_mine');
          }
          return answer;
        },
      };
      const settle = (
        x402ResourceServer.prototype as unknown as {
          settleWithPendingRetry(c: typeof client, p: PaymentPayload, r: PaymentRequirements): Promise<SettleResponse>;
        }
      ).settleWithPendingRetry;
      const answer = await settle.call({}, client, payload, charge);
      const sent = (await s.nonces(s.relayer.address)).pending - before.pending;
      await s.anvil.rpc('evm_mine');
      await s.anvil.rpc('evm_setAutomine', [true]);

      // What happened on chain.
      const relayerTxs: { hash: Hex; status: string }[] = [];
      const toBlock = BigInt((await s.anvil.rpc('eth_blockNumber')) as string);
      for (let b = fromBlock + 1n; b <= toBlock; b++) {
        const block = (await s.anvil.rpc('eth_getBlockByNumber', [`0x${b.toString(16)}`, true])) as { transactions: { hash: Hex; from: string }[] };
        for (const tx of block.transactions.filter((t) => t.from.toLowerCase() === s.relayer.address.toLowerCase())) {
          const receipt = (await s.anvil.rpc('eth_getTransactionReceipt', [tx.hash])) as { status: string };
          relayerTxs.push({ hash: tx.hash, status: receipt.status });
        }
      }
      assert.equal((await s.balance(s.payTo.address)) - payToBefore, 200_000n, 'the charge arrived once');
      assert.equal(await s.balance(s.payer.address), 10n * USD - 200_000n);
      // The breaks:
      assert.deepEqual(
        relayerTxs.map((t) => t.status),
        ['0x1'],
        `the relayer sent ${sent} transactions for one payment: ${JSON.stringify(relayerTxs)}`,
      );
      assert.equal(answer.success, true, `the resource server was told: ${JSON.stringify(answer)}`);
    });
});

/**
 * The same root, without any timeout: `tollgate facilitator` keeps no record of the authorizations it
 * is sending, so the same upto payload sent to /settle several times at once (by the resource server
 * and a retrying proxy, or by anyone when no token is set) is verified and sent once per call while
 * the first transaction waits for its block: every send but one reverts on Permit2's nonce, paid by
 * the relayer. (On anvil, which fills transactions against the pending state, the later sends are
 * refused before broadcast; on a geth-like node they are not.)
 */
describe('attack: one upto authorization settled several times at once through the facilitator', () => {
  let proxy: RunningProxy | undefined;
  let anvilRef: { rpc(m: string, p?: unknown[]): Promise<unknown> } | undefined;
  after(async () => {
    await anvilRef?.rpc('evm_setAutomine', [true]);
    await proxy?.close();
  });

  test('only one transaction is sent for one authorization (geth-like node, a 2 s block time)', async () => {
    const s = await uptoSetup({
      confirmationTimeoutMs: 10_000,
      rpcUrl: async (anvilUrl) => {
        proxy = await gethLikeRpc(anvilUrl);
        return proxy.url;
      },
    });
    anvilRef = s.anvil;
    const accepted = s.requirements(500_000n);
    const payload = await s.sign(s.payer, accepted);
    const payToBefore = await s.balance(s.payTo.address);
    const fromBlock = BigInt((await s.anvil.rpc('eth_blockNumber')) as string);
    await s.anvil.rpc('evm_setAutomine', [false]);
    await s.anvil.rpc('evm_setIntervalMining', [2]);
    const answers = await Promise.all(
      [100_000n, 200_000n, 300_000n].map((amount) =>
        s.facilitator
          .settle(payload, { ...accepted, amount: amount.toString() })
          .catch((e: Error) => ({ success: false, errorReason: e.message, transaction: '' })),
      ),
    );
    await s.anvil.rpc('evm_setIntervalMining', [0]);
    await s.anvil.rpc('evm_setAutomine', [true]);
    const toBlock = BigInt((await s.anvil.rpc('eth_blockNumber')) as string);
    const statuses: string[] = [];
    for (let b = fromBlock + 1n; b <= toBlock; b++) {
      const block = (await s.anvil.rpc('eth_getBlockByNumber', [`0x${b.toString(16)}`, true])) as { transactions: { hash: Hex; from: string }[] };
      for (const tx of block.transactions.filter((t) => t.from.toLowerCase() === s.relayer.address.toLowerCase())) {
        statuses.push(((await s.anvil.rpc('eth_getTransactionReceipt', [tx.hash])) as { status: string }).status);
      }
    }
    const moved = (await s.balance(s.payTo.address)) - payToBefore;
    assert.equal(answers.filter((a) => a.success).length, 1, JSON.stringify(answers.map((a) => a.errorReason)));
    assert.ok([100_000n, 200_000n, 300_000n].includes(moved), `moved ${moved}`);
    assert.deepEqual(statuses, ['0x1'], `relayer transactions for one authorization: ${JSON.stringify(statuses)}`);
  });
});
