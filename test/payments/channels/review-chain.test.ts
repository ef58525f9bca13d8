import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BatchSettlementDepositPayload, ChannelConfig } from '@x402/evm';
import { encodeAbiParameters, pad, parseSignature, serializeCompactSignature, signatureToCompactSignature, type Hex } from 'viem';
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS } from '../../../src/devchain/deploy.ts';
import { channelIdOf, readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { USD } from '../../support/topup-harness.ts';
import { channelSetup, DEPOSIT } from './contract-setup.ts';

/**
 * An adversarial review of the chain side of batch-settlement: the stand-in contract, the facilitator's
 * scheme and the channel reader, each attack tried on real anvil with the stock client's signatures.
 */

const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const UINT128_MAX = 2n ** 128n - 1n;

/** The same ECDSA signature with s replaced by n - s and v flipped: it recovers the same signer (malleability). */
function highS(signature: Hex): Hex {
  const r = signature.slice(2, 66);
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  const v = Number.parseInt(signature.slice(130, 132), 16);
  const flipped = v === 27 ? 28 : v === 28 ? 27 : v ^ 1;
  return `0x${r}${(SECP256K1_N - s).toString(16).padStart(64, '0')}${flipped.toString(16).padStart(2, '0')}`;
}

const reverted = (name: string) => (err: unknown) => {
  assert.match(String((err as Error).message), new RegExp(name), `expected the contract to refuse with ${name}`);
  return true;
};

type Row = { voucher: { channel: ChannelConfig; maxClaimableAmount: string }; signature: string; totalClaimed: string };
const contractRows = (rows: Row[]) =>
  rows.map((r) => ({
    voucher: { channel: r.voucher.channel, maxClaimableAmount: BigInt(r.voucher.maxClaimableAmount) },
    signature: r.signature as Hex,
    totalClaimed: BigInt(r.totalClaimed),
  }));

describe('attack: claims (review)', () => {
  test('attack: one channel twice in a claim batch is credited once, at its higher total; rows in falling order are refused whole', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const rising = [await s.claimRow(payer, config, 10_000n), await s.claimRow(payer, config, 25_000n)];
    assert.equal((await s.claim(rising)).success, true);
    assert.equal((await s.channel(config)).totalClaimed, 25_000n);
    assert.deepEqual(await s.receiverTotals(), { totalClaimed: 25_000n, totalSettled: 0n }, 'not 35,000: the second row adds only its increase');
    const same = [await s.claimRow(payer, config, 30_000n), await s.claimRow(payer, config, 30_000n)];
    assert.equal((await s.claim(same)).success, true);
    assert.deepEqual(await s.receiverTotals(), { totalClaimed: 30_000n, totalSettled: 0n });
    const falling = [await s.claimRow(payer, config, 40_000n), await s.claimRow(payer, config, 35_000n)];
    assert.equal((await s.claim(falling)).success, false);
    assert.equal((await s.channel(config)).totalClaimed, 30_000n, 'the whole batch reverted');
    const held = await s.contractHolds('usdc');
    assert.equal((await s.settle()).success, true);
    assert.equal(await s.balance('usdc', s.payTo.address), 30_000n);
    assert.equal(await s.contractHolds('usdc'), held - 30_000n);
  });

  test('attack: settle pays the receiver whoever sends it, and a stranger naming itself as receiver gets nothing', async () => {
    const s = await channelSetup();
    const [payer, stranger] = [await s.payer(), await s.payer()];
    const { config } = await s.openChannel(payer);
    const held = await s.contractHolds('usdc');
    assert.equal((await s.claim([await s.claimRow(payer, config, 70_000n)])).success, true);
    const strangerBefore = await s.balance('usdc', stranger.address);
    await s.send(stranger, 'settle', [stranger.address, s.chain.usdc]);
    assert.equal(await s.balance('usdc', stranger.address), strangerBefore);
    await s.send(stranger, 'settle', [s.payTo.address, s.chain.usdc]);
    assert.equal(await s.balance('usdc', s.payTo.address), 70_000n);
    assert.equal(await s.balance('usdc', stranger.address), strangerBefore);
    await s.send(stranger, 'settle', [s.payTo.address, s.chain.usdc]);
    assert.equal(await s.balance('usdc', s.payTo.address), 70_000n, 'a second settle pays nothing more');
    assert.equal(await s.contractHolds('usdc'), held - 70_000n);
  });

  test('attack: a claim above the balance with a voucher signed at the uint128 maximum is refused; a total of 2^128 is refused, not thrown', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const over = await s.claimRow(payer, config, UINT128_MAX, DEPOSIT + 1n);
    assert.equal((await s.claim([over])).success, false);
    await assert.rejects(s.simulate(s.payTo, 'claim', [contractRows([over])]), reverted('ClaimExceedsBalance'));
    const wrapped = { ...over, totalClaimed: (UINT128_MAX + 1n).toString() };
    const result = await s.claim([wrapped]);
    assert.equal(result.errorReason, 'invalid_batch_settlement_evm_claim_payload');
    const notRows = await s.facilitator.settle(
      { x402Version: 2, accepted: s.requirements(1n), payload: { type: 'claim', claims: { 0: over } } },
      s.requirements(1n),
    );
    assert.equal(notRows.errorReason, 'invalid_batch_settlement_evm_claim_payload');
    const refund = await s.refund(payer, config, 0n, UINT128_MAX + 1n);
    assert.equal(refund.errorReason, 'invalid_batch_settlement_evm_refund_payload');
    assert.equal((await s.channel(config)).refundNonce, 0n);
    assert.equal((await s.claim([await s.claimRow(payer, config, UINT128_MAX, DEPOSIT)])).success, true, 'the whole balance, within the ceiling');
    assert.equal((await s.channel(config)).totalClaimed, DEPOSIT);
  });
});

describe('attack: voucher signatures (review)', () => {
  test('attack: a high-s copy of a voucher signature is refused by the facilitator as the contract refuses it', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config, channelId } = await s.openChannel(payer);
    const accepted = s.requirements(10_000n);
    const good = await s.voucher(payer, channelId, 20_000n);
    const malleated = { ...good, signature: highS(good.signature as Hex) };
    const verify = (voucher: typeof good) =>
      s.facilitator.verify({ x402Version: 2, accepted, payload: { type: 'voucher', channelConfig: config, voucher } }, accepted);
    assert.equal((await verify(good)).isValid, true);
    const row = { voucher: { channel: config, maxClaimableAmount: '20000' }, signature: malleated.signature, totalClaimed: '20000' };
    await assert.rejects(s.simulate(s.payTo, 'claim', [contractRows([row])]), reverted('InvalidVoucherSignature'));
    const verdict = await verify(malleated);
    assert.equal(verdict.isValid, false, 'a voucher the contract will not honour must not be accepted for a request');
    assert.equal(verdict.invalidReason, 'invalid_batch_settlement_evm_voucher_signature');

    // The same in a deposit's first voucher and in a refund request's zero-charge voucher.
    const deposit = await s.signDeposit(payer, accepted, pad('0x09', { size: 32 }));
    const inner = deposit.payload as unknown as BatchSettlementDepositPayload;
    inner.voucher.signature = highS(inner.voucher.signature as Hex);
    assert.equal((await s.facilitator.verify(deposit, accepted)).invalidReason, 'invalid_batch_settlement_evm_voucher_signature');
    const zero = await s.voucher(payer, channelId, 0n);
    const refund = { type: 'refund', channelConfig: config, voucher: { ...zero, signature: highS(zero.signature as Hex) } };
    assert.equal(
      (await s.facilitator.verify({ x402Version: 2, accepted, payload: refund }, accepted)).invalidReason,
      'invalid_batch_settlement_evm_voucher_signature',
    );
  });

  test('attack: a voucher signature in a form the contract does not recover (64-byte compact, v of 0 or 1) is refused by the facilitator', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config, channelId } = await s.openChannel(payer);
    const accepted = s.requirements(10_000n);
    const good = await s.voucher(payer, channelId, 20_000n);
    const sig = good.signature as Hex;
    const v = Number.parseInt(sig.slice(130, 132), 16);
    const compact = serializeCompactSignature(signatureToCompactSignature(parseSignature(sig)));
    const parity: Hex = `${sig.slice(0, 130)}${(v - 27).toString(16).padStart(2, '0')}` as Hex;
    for (const signature of [compact, parity]) {
      const row = { voucher: { channel: config, maxClaimableAmount: '20000' }, signature, totalClaimed: '20000' };
      await assert.rejects(s.simulate(s.payTo, 'claim', [contractRows([row])]), reverted('InvalidVoucherSignature'));
      const voucher = { ...good, signature };
      const verdict = await s.facilitator.verify({ x402Version: 2, accepted, payload: { type: 'voucher', channelConfig: config, voucher } }, accepted);
      assert.equal(verdict.invalidReason, 'invalid_batch_settlement_evm_voucher_signature', `${signature.length} hex chars`);
    }
  });

  test('attack: a voucher signed for another chain id or another verifying contract is refused by the facilitator and the contract', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config, channelId } = await s.openChannel(payer);
    const accepted = s.requirements(10_000n);
    /** The Voucher as the stock client signs it, under a domain with one field changed. */
    const signUnder = (chainId: number, verifyingContract: Hex) =>
      payer.signTypedData({
        domain: { name: 'x402 Batch Settlement', version: '1', chainId, verifyingContract },
        types: {
          Voucher: [
            { name: 'channelId', type: 'bytes32' },
            { name: 'maxClaimableAmount', type: 'uint128' },
          ],
        },
        primaryType: 'Voucher',
        message: { channelId, maxClaimableAmount: 20_000n },
      });
    const otherChain = await signUnder(1, BATCH_SETTLEMENT_ADDRESS);
    const otherContract = await signUnder(s.chain.chain.id, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS);
    assert.equal(
      await signUnder(s.chain.chain.id, BATCH_SETTLEMENT_ADDRESS),
      (await s.voucher(payer, channelId, 20_000n)).signature,
      'only the changed field differs',
    );
    for (const signature of [otherChain, otherContract]) {
      const voucher = { channelId, maxClaimableAmount: '20000', signature };
      const verdict = await s.facilitator.verify({ x402Version: 2, accepted, payload: { type: 'voucher', channelConfig: config, voucher } }, accepted);
      assert.equal(verdict.invalidReason, 'invalid_batch_settlement_evm_voucher_signature');
      const row = { voucher: { channel: config, maxClaimableAmount: '20000' }, signature, totalClaimed: '20000' };
      await assert.rejects(s.simulate(s.payTo, 'claim', [contractRows([row])]), reverted('InvalidVoucherSignature'));
    }
    assert.equal((await s.channel(config)).totalClaimed, 0n);
  });
});

describe('attack: channel configs and deposits (review)', () => {
  test('attack: a channel with a withdrawDelay of 0, 899 s, 30 days + 1 s or the uint40 maximum cannot be opened', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const opened = await s.openChannel(payer);
    const data = encodeAbiParameters([{ type: 'uint256' }], [0n]);
    for (const withdrawDelay of [0, 899, 30 * 86_400 + 1, 2 ** 40 - 1]) {
      const config = { ...opened.config, withdrawDelay };
      await assert.rejects(s.simulate(payer, 'deposit', [config, DEPOSIT, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, data]), reverted('WithdrawDelayOutOfRange'));
    }
    for (const withdrawDelay of [900, 30 * 86_400]) {
      const config = { ...opened.config, withdrawDelay };
      await assert.rejects(s.simulate(payer, 'deposit', [config, DEPOSIT, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, data]), (err: unknown) => {
        assert.doesNotMatch(String(err), /WithdrawDelayOutOfRange/, `${withdrawDelay} s is within the bounds`);
        return true;
      });
    }
  });

  test('attack: a Permit2 deposit authorization moved to another channel, receiver or collector is refused; its own channel takes it once', async () => {
    const s = await channelSetup();
    const [payer, stranger] = [await s.payer(), await s.payer()];
    const payload = (await s.signDeposit(payer, s.requirements(USD / 100n, 'usdt'), pad('0x07', { size: 32 })))
      .payload as unknown as BatchSettlementDepositPayload;
    const auth = payload.deposit.authorization.permit2Authorization;
    assert.ok(auth, 'the stock client signs a Permit2 deposit for USDT');
    const data = encodeAbiParameters(
      [{ type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }, { type: 'bytes' }],
      [BigInt(auth.nonce), BigInt(auth.deadline), auth.signature as Hex, '0x'],
    );
    const elsewhere = { ...payload.channelConfig, salt: pad('0x08', { size: 32 }) };
    await assert.rejects(s.simulate(stranger, 'deposit', [elsewhere, DEPOSIT, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, data]));
    await assert.rejects(
      s.simulate(stranger, 'deposit', [payload.channelConfig, DEPOSIT, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, data]),
      'the other collector does not take a Permit2 authorization',
    );
    const redirected = { ...payload.channelConfig, receiver: stranger.address };
    await assert.rejects(s.simulate(stranger, 'deposit', [redirected, DEPOSIT, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, data]));
    await s.send(stranger, 'deposit', [payload.channelConfig, DEPOSIT, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, data]);
    await assert.rejects(s.simulate(stranger, 'deposit', [payload.channelConfig, DEPOSIT, PERMIT2_DEPOSIT_COLLECTOR_ADDRESS, data]));
    assert.equal((await s.channel(payload.channelConfig)).balance, DEPOSIT);
    assert.equal((await s.channel(elsewhere)).balance, 0n);
    assert.equal(await s.balance('usdt', payer.address), 100n * USD - DEPOSIT);
  });
});

describe('attack: the facilitator asked outside its chain (review)', () => {
  test('attack: a claim or verify for a network the facilitator does not serve is refused, not sent', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const foreign = { ...s.requirements(1n), network: 'eip155:8453' as const };
    const row = await s.claimRow(payer, config, 10_000n);
    const outcome = await s.facilitator.settle({ x402Version: 2, accepted: foreign, payload: { type: 'claim', claims: [row] } }, foreign).then(
      (r) => r.success,
      () => false,
    );
    assert.equal(outcome, false);
    assert.equal((await s.channel(config)).totalClaimed, 0n);
    assert.equal(channelIdOf(config, s.network) === channelIdOf(config, 'eip155:8453'), false, 'the channel id binds the chain');
  });
});

describe('attack: a lagging RPC node (review)', () => {
  test('attack: a channel read from a node behind the block of a claim just made is refused, not taken as the state', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config, channelId } = await s.openChannel(payer);
    const claimed = await s.claim([await s.claimRow(payer, config, 40_000n)]);
    const claimBlock = (await s.reader.getTransactionReceipt({ hash: claimed.transaction as Hex })).blockNumber;
    // A load-balanced RPC whose next answer comes from a node one block behind the claim.
    const lagging = { ...s.reader, getBlockNumber: async () => claimBlock - 1n, readContract: s.reader.readContract };
    await assert.rejects(readOnchainChannel(lagging, channelId, undefined, claimBlock), /behind/);
    assert.equal((await readOnchainChannel(s.reader, channelId, undefined, claimBlock)).totalClaimed, 40_000n);
  });
});
