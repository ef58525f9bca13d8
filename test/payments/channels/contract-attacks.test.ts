import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BatchSettlementDepositPayload, ChannelConfig } from '@x402/evm';
import { encodeAbiParameters, pad, type Abi, type Hex } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from '../../../src/devchain/deploy.ts';
import { channelIdOf } from '../../../src/payments/channels/onchain-channel.ts';
import { localFacilitator } from '../../../src/payments/facilitator/local-facilitator.ts';
import { USD } from '../../support/topup-harness.ts';
import { channelSetup, DEPOSIT } from './contract-setup.ts';

/**
 * What the stand-in x402BatchSettlement and the local facilitator refuse: each attack is tried
 * through the facilitator where a gateway or a caller of `tollgate facilitator` would try it, and
 * against the contract directly where anyone could.
 */

/** The deposit's EIP-3009 collector data, as the facilitator builds it from the stock client's payload. */
function erc3009CollectorData(payload: BatchSettlementDepositPayload): Hex {
  const auth = payload.deposit.authorization.erc3009Authorization;
  if (!auth) throw new Error('not an EIP-3009 deposit');
  return encodeAbiParameters(
    [{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }],
    [BigInt(auth.validAfter), BigInt(auth.validBefore), BigInt(auth.salt), auth.signature as Hex],
  );
}

const reverted = (name: string) => (err: unknown) => {
  assert.match(String((err as Error).message), new RegExp(name), `expected the contract to refuse with ${name}`);
  return true;
};

describe('attack: vouchers against the contract', () => {
  test('attack: a voucher claimed again claims nothing more, and a lower voucher is refused', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const row = await s.claimRow(payer, config, 40_000n, 30_000n);
    assert.equal((await s.claim([row])).success, true);
    const replay = await s.claim([row]);
    assert.equal(replay.success, true, 'the same total again is a no-op, not an error (a claimer retrying is not refused)');
    assert.equal((await s.channel(config)).totalClaimed, 30_000n);
    assert.deepEqual(await s.receiverTotals(), { totalClaimed: 30_000n, totalSettled: 0n }, 'the replay credited the receiver nothing');

    const lower = await s.claim([await s.claimRow(payer, config, 20_000n)]);
    assert.equal(lower.success, false);
    assert.equal(lower.errorReason, 'invalid_batch_settlement_evm_claim_simulation_failed');
    const lowerRows = toContractClaims([await s.claimRow(payer, config, 20_000n)]);
    await assert.rejects(s.simulate(s.payTo, 'claim', [lowerRows]), reverted('ClaimBelowClaimed'));
    await assert.rejects(s.simulate(payer, 'claim', [lowerRows]), reverted('NotReceiverSide'));
    assert.equal((await s.channel(config)).totalClaimed, 30_000n);
  });

  test('attack: a claim above the signed maximum is refused, and the same claim within it succeeds', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const over = await s.claim([await s.claimRow(payer, config, 10_000n, 10_001n)]);
    assert.equal(over.success, false);
    await assert.rejects(
      s.simulate(s.payTo, 'claim', [toContractClaims([await s.claimRow(payer, config, 10_000n, 10_001n)])]),
      reverted('ClaimExceedsVoucher'),
    );
    assert.equal((await s.channel(config)).totalClaimed, 0n);
    assert.equal((await s.claim([await s.claimRow(payer, config, 10_000n)])).success, true);
    assert.equal((await s.channel(config)).totalClaimed, 10_000n);
  });

  test('attack: a voucher signed for one channel is refused on another, of another payer or of the same payer', async () => {
    const s = await channelSetup();
    const [alice, mallory] = [await s.payer(), await s.payer()];
    const aliceChannel = await s.openChannel(alice);
    const aliceOther = await s.openChannel(alice, 'usdc', pad('0x01', { size: 32 }));
    const malloryChannel = await s.openChannel(mallory);
    const aliceVoucher = await s.voucher(alice, aliceChannel.channelId, 50_000n);
    for (const target of [malloryChannel.config, aliceOther.config]) {
      const row = {
        voucher: { channel: target, maxClaimableAmount: aliceVoucher.maxClaimableAmount },
        signature: aliceVoucher.signature,
        totalClaimed: '50000',
      };
      const result = await s.claim([row]);
      assert.equal(result.success, false, 'the voucher names its channel id; the contract derives the id from the config it is given');
      await assert.rejects(s.simulate(s.payTo, 'claim', [toContractClaims([row])]), reverted('InvalidVoucherSignature'));
      assert.equal((await s.channel(target)).totalClaimed, 0n);
    }
  });

  test('attack: claims signed by a key that is not the receiverAuthorizer are refused; a batch mixing authorizers is refused', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const rows = toContractClaims([await s.claimRow(payer, config, 10_000n)]);
    const digest = (await s.reader.readContract({
      address: BATCH_SETTLEMENT_ADDRESS,
      abi: artifacts.StandInBatchSettlement.abi as Abi,
      functionName: 'getClaimBatchDigest',
      args: [rows],
    })) as Hex;
    const forged = await s.payTo.sign({ hash: digest }); // the receiver's own key, not the authorizer's
    await assert.rejects(s.simulate(s.payTo, 'claimWithSignature', [rows, forged]), reverted('InvalidAuthorizerSignature'));
    const other: ChannelConfig = { ...config, receiverAuthorizer: s.payTo.address };
    await assert.rejects(
      s.simulate(s.relayer, 'claimWithSignature', [[...rows, ...toContractClaims([await s.claimRow(payer, other, 1n)])], forged]),
      reverted('MixedReceiverAuthorizers'),
    );
  });
});

describe('attack: deposits against the contract', () => {
  test('attack: a deposit authorization used twice, moved to another channel, or sent to the collector directly is refused', async () => {
    const s = await channelSetup();
    const [payer, stranger] = [await s.payer(), await s.payer()];
    const opened = await s.openChannel(payer);
    const used = opened.payload.payload as unknown as BatchSettlementDepositPayload;

    const again = await s.facilitator.settle(opened.payload, opened.accepted);
    assert.equal(again.success, false, 'the facilitator refuses a used authorization');
    await assert.rejects(
      s.simulate(stranger, 'deposit', [used.channelConfig, DEPOSIT, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, erc3009CollectorData(used)]),
      /authorization is used/,
    );
    assert.equal((await s.channel(opened.config)).balance, DEPOSIT, 'credited once');

    // A fresh authorization for another channel of the same payer: its nonce binds that channel's id.
    const salt = pad('0x02', { size: 32 });
    const fresh = (await s.signDeposit(payer, s.requirements(USD / 100n), salt)).payload as unknown as BatchSettlementDepositPayload;
    const elsewhere: ChannelConfig = { ...fresh.channelConfig, salt: pad('0x03', { size: 32 }) };
    await assert.rejects(
      s.simulate(stranger, 'deposit', [elsewhere, DEPOSIT, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, erc3009CollectorData(fresh)]),
      /invalid signature/,
    );
    await assert.rejects(
      s.chain.client(stranger).simulateContract({
        address: ERC3009_DEPOSIT_COLLECTOR_ADDRESS,
        abi: artifacts.StandInErc3009DepositCollector.abi as Abi,
        functionName: 'collect',
        args: [payer.address, s.chain.usdc, DEPOSIT, fresh.voucher.channelId, erc3009CollectorData(fresh)],
      }),
      reverted('OnlyBatchSettlement'),
    );
    await assert.rejects(
      s.simulate(stranger, 'deposit', [fresh.channelConfig, DEPOSIT, stranger.address, erc3009CollectorData(fresh)]),
      reverted('UnknownCollector'),
    );
    // The genuine use of that authorization still works, once.
    await s.send(stranger, 'deposit', [fresh.channelConfig, DEPOSIT, ERC3009_DEPOSIT_COLLECTOR_ADDRESS, erc3009CollectorData(fresh)]);
    assert.equal((await s.channel(fresh.channelConfig)).balance, DEPOSIT);
    assert.equal(await s.balance('usdc', payer.address), 100n * USD - 2n * DEPOSIT);
  });
});

describe('attack: the facilitator signs only for its own receiver', () => {
  test('attack: a claim, settle or refund naming another receiver than payTo is refused before the receiverAuthorizer signs', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const row = await s.claimRow(payer, config, 10_000n);
    const foreign = { ...s.requirements(1n), payTo: payer.address };
    const claim = await s.facilitator.settle({ x402Version: 2, accepted: foreign, payload: { type: 'claim', claims: [row] } }, foreign);
    assert.equal(claim.success, false);
    assert.equal(claim.errorReason, 'invalid_batch_settlement_evm_receiver_mismatch');
    const refundVoucher = await s.voucher(payer, channelIdOf(config, s.network), 0n);
    const refund = await s.facilitator.settle(
      {
        x402Version: 2,
        accepted: foreign,
        payload: { type: 'refund', channelConfig: config, voucher: refundVoucher, amount: '1', refundNonce: '0', claims: [] },
      },
      foreign,
    );
    assert.equal(refund.errorReason, 'invalid_batch_settlement_evm_receiver_mismatch');
    const settle = await s.facilitator.settle(
      { x402Version: 2, accepted: foreign, payload: { type: 'settle', receiver: s.payTo.address, token: s.chain.usdc } },
      foreign,
    );
    assert.equal(settle.errorReason, 'invalid_batch_settlement_evm_receiver_mismatch');
    assert.deepEqual(await s.channel(config), { balance: DEPOSIT, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 0n });
  });
});

describe('attack: a facilitator with no receiverAuthorizer key', () => {
  test('attack: given no key (as `tollgate facilitator` is unless the gateway passes one) it advertises none and signs no claim or refund', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const { config } = await s.openChannel(payer);
    const bare = localFacilitator({
      relayerKey: s.relayer.privateKey,
      rpcUrls: { [s.network]: s.anvil.rpcUrl },
      allowedFactories: [],
      confirmationTimeoutMs: 10_000,
    });
    assert.equal(bare.receiverAuthorizer, undefined);
    const { kinds } = await bare.supported();
    const kind = (kinds as Array<{ scheme: string; extra?: Record<string, unknown> }>).find((k) => k.scheme === 'batch-settlement');
    assert.ok(kind, 'deposits and signed claims still go through it');
    assert.equal(kind.extra?.receiverAuthorizer, undefined, 'no receiverAuthorizer is advertised');
    const accepted = s.requirements(1n);
    const claim = await bare.settle({ x402Version: 2, accepted, payload: { type: 'claim', claims: [await s.claimRow(payer, config, 10_000n)] } }, accepted);
    assert.equal(claim.errorReason, 'invalid_batch_settlement_evm_authorizer_not_configured');
    const voucher = await s.voucher(payer, channelIdOf(config, s.network), 0n);
    const refund = await bare.settle(
      { x402Version: 2, accepted, payload: { type: 'refund', channelConfig: config, voucher, amount: DEPOSIT.toString(), refundNonce: '0', claims: [] } },
      accepted,
    );
    assert.equal(refund.errorReason, 'invalid_batch_settlement_evm_authorizer_not_configured');
    assert.deepEqual(await s.channel(config), { balance: DEPOSIT, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 0n });
  });
});

/** The claim rows as the contract's ABI takes them (amounts as bigints). */
function toContractClaims(rows: Array<{ voucher: { channel: ChannelConfig; maxClaimableAmount: string }; signature: string; totalClaimed: string | bigint }>) {
  return rows.map((r) => ({
    voucher: { channel: r.voucher.channel, maxClaimableAmount: BigInt(r.voucher.maxClaimableAmount) },
    signature: r.signature as Hex,
    totalClaimed: BigInt(r.totalClaimed),
  }));
}
