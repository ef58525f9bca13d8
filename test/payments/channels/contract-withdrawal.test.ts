import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import type { ChannelConfig } from '@x402/evm';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { USD } from '../../support/topup-harness.ts';
import { channelSetup, DEPOSIT, WITHDRAW_DELAY, type ChannelSetup } from './contract-setup.ts';

/**
 * The payer's escape hatch: a timed withdrawal of the unclaimed escrow, finalized after the channel's
 * withdrawDelay, during which the receiver can still claim what it was signed for. The chain's clock
 * is moved forward (evm_increaseTime), so every channel of this file is opened first: an EIP-3009
 * authorization is valid until a wall-clock time the moved chain would already have passed.
 */
describe('the payer’s timed withdrawal', () => {
  let s: ChannelSetup;
  let payer: FundedAccount;
  let stranger: FundedAccount;
  const channels: ChannelConfig[] = [];

  before(async () => {
    s = await channelSetup();
    [payer, stranger] = [await s.payer(), await s.payer()];
    for (const salt of ['0x01', '0x02', '0x03'] as const) channels.push((await s.openChannel(payer, 'usdc', `0x${salt.slice(2).padStart(64, '0')}`)).config);
  });

  const later = async (seconds: number) => {
    await s.anvil.rpc('evm_increaseTime', [seconds]);
    await s.anvil.rpc('evm_mine');
  };

  test('a cooperative refund during a pending withdrawal shrinks it by what it returned, and cancels it once it covers it', async () => {
    const config = channels[2]!;
    await s.send(payer, 'initiateWithdraw', [config, 2n * USD]);
    assert.equal((await s.channel(config)).withdrawAmount, 2n * USD);
    assert.equal((await s.refund(payer, config, 0n, USD)).success, true);
    assert.equal((await s.channel(config)).withdrawAmount, USD);
    assert.equal((await s.refund(payer, config, 0n, 3n * USD)).success, true);
    const after = await s.channel(config);
    assert.equal(after.withdrawRequestedAt, 0, 'the refund covered the withdrawal: nothing is pending');
    assert.equal(after.balance, DEPOSIT - 4n * USD);
  });

  test('the receiver claims during the delay; after it the payer gets the unclaimed rest, and the claimed part settles', async () => {
    const config = channels[0]!;
    const charged = 12_000n;
    await assert.rejects(s.simulate(stranger, 'initiateWithdraw', [config, DEPOSIT]), /NotPayerSide/);
    await assert.rejects(s.simulate(payer, 'initiateWithdraw', [config, DEPOSIT + 1n]), /InvalidWithdrawAmount/);
    await s.send(payer, 'initiateWithdraw', [config, DEPOSIT]);
    const pending = await s.channel(config);
    assert.ok(pending.withdrawRequestedAt > 0, 'the facilitator and the gateway see the withdrawal started');
    assert.equal(pending.withdrawAmount, DEPOSIT);
    await assert.rejects(s.simulate(payer, 'initiateWithdraw', [config, 1n]), /WithdrawalPending/);

    assert.equal((await s.claim([await s.claimRow(payer, config, charged + 5_000n, charged)])).success, true, 'claims still land during the delay');
    await later(WITHDRAW_DELAY - 60);
    await assert.rejects(s.simulate(payer, 'finalizeWithdraw', [config]), /WithdrawDelayNotElapsed/);
    await later(60);
    const held = await s.balance('usdc', payer.address);
    await s.send(payer, 'finalizeWithdraw', [config]);
    assert.equal((await s.balance('usdc', payer.address)) - held, DEPOSIT - charged, 'capped by what was still unclaimed');
    assert.deepEqual(await s.channel(config), { balance: charged, totalClaimed: charged, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 0n });
    assert.equal((await s.settle()).amount, charged.toString());
    assert.equal(await s.balance('usdc', s.payTo.address), charged);
  });

  test('attack: a voucher claimed after a finalized withdrawal claims nothing: the escrow is gone', async () => {
    const config = channels[1]!;
    const signedButUnclaimed = await s.claimRow(payer, config, 9_000n);
    await s.send(payer, 'initiateWithdraw', [config, DEPOSIT]);
    await later(WITHDRAW_DELAY);
    await s.send(payer, 'finalizeWithdraw', [config]);
    const late = await s.claim([signedButUnclaimed]);
    assert.equal(late.success, false);
    await assert.rejects(s.simulate(s.payTo, 'finalizeWithdraw', [config]), /NotPayerSide/);
    assert.deepEqual(await s.channel(config), { balance: 0n, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 0n });
  });
});
