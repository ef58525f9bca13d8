import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BatchSettlementVoucherClaim, ChannelConfig } from '@x402/evm';
import { pad, toHex } from 'viem';
import { USD } from '../../support/topup-harness.ts';
import { channelSetup } from './contract-setup.ts';

/**
 * Gas of each batch-settlement transaction on the stand-in contract, sent by the local facilitator
 * (printed as test diagnostics; the figures in docs/DECISIONS.md come from here). The stand-in is not
 * x402's own bytecode: its figures show the shape (one claim for many channels), not mainnet costs.
 */
describe('batch-settlement gas', () => {
  test('deposit, claims of 1, 10 and 100 channels in one transaction each, settle and refund', async (t) => {
    const s = await channelSetup();
    const payer = await s.payer(600n);
    const report = (what: string, gas: bigint) => t.diagnostic(`gas ${what}: ${gas}`);

    const usdc = await s.openChannel(payer, 'usdc', pad('0x00', { size: 32 }));
    report('deposit, first (EIP-3009 USDC)', await s.gasUsed(usdc.settled.transaction));
    const usdt = await s.openChannel(payer, 'usdt', pad('0x00', { size: 32 }));
    report('deposit, first (Permit2 USDT)', await s.gasUsed(usdt.settled.transaction));

    const configs: ChannelConfig[] = [usdc.config];
    for (let i = 1; i < 111; i++) configs.push((await s.openChannel(payer, 'usdc', pad(toHex(i), { size: 32 }))).config);
    const rows = (from: number, to: number): Promise<BatchSettlementVoucherClaim[]> =>
      Promise.all(configs.slice(from, to).map((config) => s.claimRow(payer, config, 20_000n, 10_000n)));

    const perChannel: Record<number, bigint> = {};
    for (const [from, to] of [
      [0, 1],
      [1, 11],
      [11, 111],
    ] as const) {
      const claimed = await s.claim(await rows(from, to));
      assert.equal(claimed.success, true, `${claimed.errorReason} ${claimed.errorMessage ?? ''}`);
      const gas = await s.gasUsed(claimed.transaction);
      perChannel[to - from] = gas / BigInt(to - from);
      report(`claim of ${to - from} channel(s), one claimWithSignature`, gas);
    }
    assert.equal((await s.receiverTotals()).totalClaimed, 111n * 10_000n);
    assert.ok(perChannel[100]! < perChannel[1]!, 'a batch costs less per channel than claims one by one');

    const settled = await s.settle();
    assert.equal(settled.amount, (111n * 10_000n).toString());
    report('settle (111 claims, one transfer)', await s.gasUsed(settled.transaction));

    const refund = await s.refund(payer, usdt.config, 0n, USD);
    assert.equal(refund.success, true, refund.errorReason);
    report('refund (refundWithSignature, partial)', await s.gasUsed(refund.transaction));
    const closing = await s.refund(payer, configs[1]!, 10_000n, 5n * USD);
    assert.equal(closing.success, true, closing.errorReason);
    report('refund (the rest, after the claim)', await s.gasUsed(closing.transaction));
  });
});
