import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ChannelConfig } from '@x402/evm';
import { encodeAbiParameters, encodeFunctionData, pad, toFunctionSelector, type Abi, type Address, type Hex } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { channelIdOf } from '../../../src/payments/channels/onchain-channel.ts';
import { channelSetup, WITHDRAW_DELAY, type ChannelSetup } from './contract-setup.ts';

/**
 * A channel config may name any token, so x402BatchSettlement meets tokens that fight back:
 * contracts/HostileToken.sol returns false from transfer, or calls the contract again from inside
 * it. The token is also the channel's receiverAuthorizer here, so its re-entry passes the
 * receiver-side check and only the re-entry guard (and the order of state before transfer) stands.
 */

const hostileAbi = artifacts.HostileToken.abi as Abi;
const settlementAbi = artifacts.StandInBatchSettlement.abi as Abi;
const REENTERED = toFunctionSelector('Reentered()');
const DEPOSIT = 1_000_000n;

async function hostileChannel(s: ChannelSetup) {
  const payer = await s.payer();
  const owner = s.chain.client(s.relayer);
  const hash = await owner.deployContract({ abi: hostileAbi, bytecode: artifacts.HostileToken.bytecode as Hex });
  const token = (await owner.waitForTransactionReceipt({ hash })).contractAddress as Address;
  const write = async (from: FundedAccount, functionName: string, args: unknown[]) => {
    const tx = await s.chain.client(from).writeContract({ address: token, abi: hostileAbi, functionName, args });
    await s.chain.client(from).waitForTransactionReceipt({ hash: tx });
  };
  const read = (functionName: string, args: unknown[] = []) => s.reader.readContract({ address: token, abi: hostileAbi, functionName, args });
  await write(s.relayer, 'mint', [payer.address, DEPOSIT]);
  const config: ChannelConfig = {
    payer: payer.address,
    payerAuthorizer: payer.address,
    receiver: s.payTo.address,
    receiverAuthorizer: token,
    token,
    withdrawDelay: WITHDRAW_DELAY,
    salt: pad('0x00', { size: 32 }),
  };
  const data = encodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }], [0n, 2n ** 64n, 0n, '0x']);
  await s.send(payer, 'deposit', [config, DEPOSIT, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, data]);
  const tokenBalance = async (who: Address) => (await read('balanceOf', [who])) as bigint;
  /** The token will call x402BatchSettlement with `call` from inside its next transfer. */
  const armReentry = (functionName: string, args: unknown[]) =>
    write(s.relayer, 'arm', [2, BATCH_SETTLEMENT_ADDRESS, encodeFunctionData({ abi: settlementAbi, functionName, args })]);
  const reentry = async () => ({ succeeded: (await read('reentrySucceeded')) as boolean, result: (await read('reentryResult')) as Hex });
  return { payer, token, config, write, tokenBalance, armReentry, reentry };
}

describe('attack: a token that fights back (review)', () => {
  test('attack: a token re-entering refund from inside the refund transfer is refused; the payer is refunded once', async () => {
    const s = await channelSetup();
    const h = await hostileChannel(s);
    await h.armReentry('refund', [h.config, 400_000n]);
    await s.send(s.payTo, 'refund', [h.config, 400_000n]);
    const inner = await h.reentry();
    assert.equal(inner.succeeded, false);
    assert.equal(inner.result.slice(0, 10), REENTERED);
    assert.equal(await h.tokenBalance(h.payer.address), 400_000n, 'refunded once, not twice');
    assert.equal(await h.tokenBalance(BATCH_SETTLEMENT_ADDRESS), DEPOSIT - 400_000n);
    assert.deepEqual(await s.channel(h.config), { balance: DEPOSIT - 400_000n, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 1n });
  });

  test('attack: a token re-entering settle from inside the settle transfer is refused; the receiver is paid its claim once', async () => {
    const s = await channelSetup();
    const h = await hostileChannel(s);
    const voucher = await s.voucher(h.payer, channelIdOf(h.config, s.network), 300_000n);
    await s.send(s.payTo, 'claim', [[{ voucher: { channel: h.config, maxClaimableAmount: 300_000n }, signature: voucher.signature, totalClaimed: 300_000n }]]);
    await h.armReentry('settle', [s.payTo.address, h.token]);
    await s.send(s.payTo, 'settle', [s.payTo.address, h.token]);
    const inner = await h.reentry();
    assert.equal(inner.succeeded, false);
    assert.equal(inner.result.slice(0, 10), REENTERED);
    assert.equal(await h.tokenBalance(s.payTo.address), 300_000n);
    assert.equal(await h.tokenBalance(BATCH_SETTLEMENT_ADDRESS), DEPOSIT - 300_000n);
    await s.send(s.payTo, 'settle', [s.payTo.address, h.token]);
    assert.equal(await h.tokenBalance(s.payTo.address), 300_000n, 'nothing left to settle');
  });

  test('attack: a token whose transfer returns false moves no channel state: the refund reverts and its nonce stays', async () => {
    const s = await channelSetup();
    const h = await hostileChannel(s);
    await h.write(s.relayer, 'mint', [h.payer.address, 1n]);
    await h.write(s.relayer, 'arm', [1, BATCH_SETTLEMENT_ADDRESS, '0x']);
    await assert.rejects(s.simulate(s.payTo, 'refund', [h.config, 400_000n]), (err: unknown) => /TokenTransferFailed/.test(String(err)));
    await assert.rejects(
      s.simulate(h.payer, 'deposit', [
        { ...h.config, salt: pad('0x01', { size: 32 }) },
        1n,
        ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
        encodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }], [0n, 2n ** 64n, 1n, '0x']),
      ]),
      (err: unknown) => /TokenTransferFailed/.test(String(err)),
      'the collector forwarding to the contract is refused too: no channel is credited with tokens that did not arrive',
    );
    assert.deepEqual(await s.channel(h.config), { balance: DEPOSIT, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 0n });
  });
});
