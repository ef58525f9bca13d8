import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BATCH_SETTLEMENT_DOMAIN, refundTypes, type ChannelConfig } from '@x402/evm';
import type { Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS } from '../../../src/devchain/deploy.ts';
import { channelIdOf } from '../../../src/payments/channels/onchain-channel.ts';
import { USD } from '../../support/topup-harness.ts';
import { channelSetup, DEPOSIT, type ChannelSetup } from './contract-setup.ts';

/**
 * The cooperative refund: the payer asks, the gateway completes the payload (refund nonce, the claim
 * of what it charged), the facilitator signs as receiverAuthorizer and sends claim + refund in one
 * multicall. The payer gets back everything not charged; the charged part stays claimable by settle.
 */
describe('cooperative refund through the local facilitator', () => {
  test('a full refund claims the charged total and returns the rest to the payer in one transaction; settle then pays the receiver', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const charged = 7_000n;
    // The payer's refund request (a zero-charge voucher at the charged total) passes the facilitator's verify first.
    const request = { type: 'refund', channelConfig: config, voucher: await s.voucher(payer, channelIdOf(config, s.network), charged) };
    const accepted = s.requirements(USD / 100n);
    assert.equal((await s.facilitator.verify({ x402Version: 2, accepted, payload: request }, accepted)).isValid, true);
    const claims = [await s.claimRow(payer, config, charged)];
    const refunded = await s.refund(payer, config, charged, DEPOSIT, claims);
    assert.equal(refunded.success, true, `${refunded.errorReason} ${refunded.errorMessage ?? ''}`);
    assert.equal(refunded.amount, (DEPOSIT - charged).toString());
    assert.equal(await s.balance('usdc', payer.address), 100n * USD - charged, 'everything but the charge is back');
    assert.deepEqual(await s.channel(config), { balance: charged, totalClaimed: charged, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 1n });
    assert.equal((await s.settle()).amount, charged.toString());
    assert.equal(await s.balance('usdc', s.payTo.address), charged);
  });

  test('a partial refund keeps the channel open; the payer tops it up and pays on from the claimed total', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const refunded = await s.refund(payer, config, 0n, USD);
    assert.equal(refunded.success, true, refunded.errorReason);
    assert.deepEqual(await s.channel(config), { balance: DEPOSIT - USD, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 1n });
    assert.equal((await s.claim([await s.claimRow(payer, config, 2_000n)])).success, true);
    assert.equal((await s.channel(config)).totalClaimed, 2_000n);
  });

  test('attack: a refund authorization is spent by its first use, whoever relays it, and only the receiver side may refund unsigned', async () => {
    const s = await channelSetup();
    const [payer, stranger] = [await s.payer(), await s.payer()];
    const { config } = await s.openChannel(payer);
    const signature = await refundSignature(s, config, 0n, USD);
    await s.send(stranger, 'refundWithSignature', [config, USD, 0n, signature]);
    assert.equal((await s.channel(config)).balance, DEPOSIT - USD);
    await assert.rejects(s.simulate(stranger, 'refundWithSignature', [config, USD, 0n, signature]), /InvalidRefundNonce/);
    await assert.rejects(s.simulate(stranger, 'refundWithSignature', [config, 2n * USD, 1n, signature]), /InvalidAuthorizerSignature/);
    await assert.rejects(s.simulate(stranger, 'refund', [config, USD]), /NotReceiverSide/);
    await assert.rejects(s.simulate(payer, 'refund', [config, USD]), /NotReceiverSide/);
    // A refund by the receiver itself spends the nonce a pre-signed refund was made for.
    const presigned = await refundSignature(s, config, 1n, USD);
    await s.send(s.payTo, 'refund', [config, 0n]);
    await assert.rejects(s.simulate(stranger, 'refundWithSignature', [config, USD, 1n, presigned]), /InvalidRefundNonce/);
    assert.deepEqual(await s.channel(config), { balance: DEPOSIT - USD, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 2n });
    assert.equal(await s.balance('usdc', payer.address), 100n * USD - DEPOSIT + USD);
  });
});

/** The receiverAuthorizer's EIP-712 Refund signature, typed as @x402/evm types it (the relayer is the authorizer here). */
function refundSignature(s: ChannelSetup, config: ChannelConfig, nonce: bigint, amount: bigint): Promise<Hex> {
  return s.relayer.signTypedData({
    domain: { ...BATCH_SETTLEMENT_DOMAIN, chainId: s.anvil.chainId, verifyingContract: BATCH_SETTLEMENT_ADDRESS },
    types: refundTypes,
    primaryType: 'Refund',
    message: { channelId: channelIdOf(config, s.network), nonce, amount },
  });
}
