import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { USD } from '../../support/topup-harness.ts';
import { channelSetup, DEPOSIT } from './contract-setup.ts';

/**
 * x402 batch-settlement on the stand-in x402BatchSettlement (contracts/StandInBatchSettlement.sol)
 * at its canonical address, through the local facilitator running @x402/evm's own facilitator code,
 * paid by the stock @x402/evm client: a deposit, a claim of the charged total, a settle to the receiver.
 */
describe('batch-settlement channels through the local facilitator', () => {
  test('a USDC deposit signed by the stock client settles; a claim of the charged total, then a settle, pay the receiver exactly that', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { kinds } = await s.facilitator.supported();
    const kind = (kinds as Array<{ scheme: string; network: string; extra?: { receiverAuthorizer?: string } }>).find(
      (k) => k.scheme === 'batch-settlement' && k.network === s.network,
    );
    assert.equal(kind?.extra?.receiverAuthorizer, s.facilitator.receiverAuthorizer, 'the facilitator advertises its receiverAuthorizer');

    const held = await s.contractHolds('usdc');
    const opened = await s.openChannel(payer);
    assert.equal(opened.settled.amount, DEPOSIT.toString());
    assert.deepEqual(await s.channel(opened.config), { balance: DEPOSIT, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 0n });
    assert.equal(await s.balance('usdc', payer.address), 100n * USD - DEPOSIT);
    assert.equal((await s.contractHolds('usdc')) - held, DEPOSIT);

    // Requests charged 3,000 + 2,500 + 1,000; the latest voucher's ceiling is that plus the last request's 10,000.
    const charged = 6_500n;
    const claimed = await s.claim([await s.claimRow(payer, opened.config, charged + 10_000n, charged)]);
    assert.equal(claimed.success, true, `${claimed.errorReason} ${claimed.errorMessage ?? ''}`);
    assert.equal((await s.channel(opened.config)).totalClaimed, charged);
    assert.deepEqual(await s.receiverTotals(), { totalClaimed: charged, totalSettled: 0n });
    assert.equal(await s.balance('usdc', s.payTo.address), 0n, 'a claim moves no tokens');

    const settled = await s.settle();
    assert.equal(settled.success, true, `${settled.errorReason} ${settled.errorMessage ?? ''}`);
    assert.equal(settled.amount, charged.toString());
    assert.equal(await s.balance('usdc', s.payTo.address), charged);
    assert.deepEqual(await s.receiverTotals(), { totalClaimed: charged, totalSettled: charged });
    assert.equal((await s.contractHolds('usdc')) - held, DEPOSIT - charged, 'the unclaimed rest stays in escrow');
    assert.equal((await s.channel(opened.config)).balance, DEPOSIT, 'settled claims still count in the channel balance');
  });
});
