import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BATCH_SETTLEMENT_DOMAIN, claimBatchTypes, voucherTypes, type BatchSettlementDepositPayload } from '@x402/evm';
import { hashTypedData, parseAbi, toEventSelector, toFunctionSelector, type Abi, type AbiEvent, type AbiFunction, type Hex } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { BATCH_SETTLEMENT_ADDRESS } from '../../../src/devchain/deploy.ts';
import { channelIdOf } from '../../../src/payments/channels/onchain-channel.ts';
import { USD } from '../../support/topup-harness.ts';
import { channelSetup, DEPOSIT } from './contract-setup.ts';

// x402BatchSettlement's interface as @x402/evm 2.27's batch-settlement ABI declares it (the package does not export that ABI).
const CONFIG = '(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)';
const CLAIMS = `((${CONFIG} channel,uint128 maxClaimableAmount) voucher,bytes signature,uint128 totalClaimed)[]`;
const packageAbi = parseAbi([
  'function multicall(bytes[] data) returns (bytes[] results)',
  `function deposit(${CONFIG} config, uint128 amount, address collector, bytes collectorData)`,
  `function claim(${CLAIMS} voucherClaims)`,
  `function claimWithSignature(${CLAIMS} voucherClaims, bytes authorizerSignature)`,
  'function settle(address receiver, address token)',
  `function initiateWithdraw(${CONFIG} config, uint128 amount)`,
  `function finalizeWithdraw(${CONFIG} config)`,
  `function refund(${CONFIG} config, uint128 amount)`,
  `function refundWithSignature(${CONFIG} config, uint128 amount, uint256 nonce, bytes receiverAuthorizerSignature)`,
  `function getChannelId(${CONFIG} config) view returns (bytes32)`,
  'function CHANNEL_CONFIG_TYPEHASH() view returns (bytes32)',
  'function channels(bytes32 channelId) view returns (uint128 balance, uint128 totalClaimed)',
  'function pendingWithdrawals(bytes32 channelId) view returns (uint128 amount, uint40 initiatedAt)',
  'function receivers(address receiver, address token) view returns (uint128 totalClaimed, uint128 totalSettled)',
  'function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) view returns (bytes32)',
  'function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) view returns (bytes32)',
  'function refundNonce(bytes32 channelId) view returns (uint256)',
  `function getClaimBatchDigest(${CLAIMS} voucherClaims) view returns (bytes32)`,
  'event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount)',
]);

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
    assert.equal(kind?.extra?.receiverAuthorizer, s.relayer.address, 'the facilitator advertises the receiverAuthorizer it was given');

    const held = await s.contractHolds('usdc');
    const opened = await s.openChannel(payer);
    assert.equal(opened.settled.amount, DEPOSIT.toString());
    assert.deepEqual(await s.channel(opened.config), { balance: DEPOSIT, totalClaimed: 0n, withdrawRequestedAt: 0, withdrawAmount: 0n, refundNonce: 0n });
    assert.equal(await s.balance('usdc', payer.address), 100n * USD - DEPOSIT);
    assert.equal((await s.contractHolds('usdc')) - held, DEPOSIT);

    // Requests charged 3,000 + 2,500 + 1,000; the latest voucher's ceiling is that plus the last request's 10,000.
    const charged = 6_500n;
    // The next request's voucher payload, verified by the facilitator as the gateway does when its mirror is stale.
    const next = { type: 'voucher', channelConfig: opened.config, voucher: await s.voucher(payer, opened.channelId, charged + 10_000n) };
    const verified = await s.facilitator.verify({ x402Version: 2, accepted: opened.accepted, payload: next }, opened.accepted);
    assert.equal(verified.isValid, true, verified.invalidReason);
    assert.deepEqual(verified.extra, { channelId: opened.channelId, balance: DEPOSIT.toString(), totalClaimed: '0', withdrawRequestedAt: 0, refundNonce: '0' });
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

  test('a Permit2 USDT deposit signed by the stock client settles once; the same authorization again is refused', async () => {
    const s = await channelSetup();
    const payer = await s.payer();
    const opened = await s.openChannel(payer, 'usdt');
    const inner = opened.payload.payload as unknown as BatchSettlementDepositPayload;
    assert.ok(inner.deposit.authorization.permit2Authorization, 'the stock client signed a Permit2 witness transfer');
    assert.equal((await s.channel(opened.config)).balance, DEPOSIT);
    assert.equal(await s.balance('usdt', payer.address), 100n * USD - DEPOSIT);
    const again = await s.facilitator.settle(opened.payload, opened.accepted);
    assert.equal(again.success, false, 'Permit2 spent the nonce');
    assert.equal((await s.channel(opened.config)).balance, DEPOSIT, 'credited once');
    assert.equal((await s.claim([await s.claimRow(payer, opened.config, 30_000n)], 'usdt')).success, true);
    assert.equal((await s.settle('usdt')).amount, '30000');
    assert.equal(await s.balance('usdt', s.payTo.address), 30_000n);
  });

  test('the stand-in has every function and the Settled event of the package ABI, and hashes exactly as the package signs', async () => {
    const standIn = artifacts.StandInBatchSettlement.abi as Abi;
    const selectors = new Set(standIn.filter((e): e is AbiFunction => e.type === 'function').map((f) => toFunctionSelector(f)));
    for (const f of (packageAbi as Abi).filter((e): e is AbiFunction => e.type === 'function')) {
      assert.ok(selectors.has(toFunctionSelector(f)), `the stand-in lacks ${f.name} as the package calls it`);
    }
    const events = standIn.filter((e): e is AbiEvent => e.type === 'event').map((e) => toEventSelector(e));
    assert.ok(events.includes(toEventSelector((packageAbi as Abi).find((e): e is AbiEvent => e.type === 'event')!)));

    const s = await channelSetup();
    const payer = await s.payer();
    const { config, channelId } = await s.openChannel(payer);
    const read = (functionName: string, args: unknown[]) =>
      s.reader.readContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: packageAbi, functionName, args } as never);
    assert.equal(await read('getChannelId', [config]), channelIdOf(config, s.network));
    assert.equal(channelId, channelIdOf(config, s.network));
    const domain = { ...BATCH_SETTLEMENT_DOMAIN, chainId: s.anvil.chainId, verifyingContract: BATCH_SETTLEMENT_ADDRESS };
    const voucherDigest = hashTypedData({ domain, types: voucherTypes, primaryType: 'Voucher', message: { channelId, maxClaimableAmount: 42n } });
    assert.equal(await read('getVoucherDigest', [channelId, 42n]), voucherDigest);
    const row = await s.claimRow(payer, config, 42n, 40n);
    const batchDigest = hashTypedData({
      domain,
      types: claimBatchTypes,
      primaryType: 'ClaimBatch',
      message: { claims: [{ channelId, maxClaimableAmount: 42n, totalClaimed: 40n }] },
    });
    const rows = [{ voucher: { channel: config, maxClaimableAmount: 42n }, signature: row.signature as Hex, totalClaimed: 40n }];
    assert.equal(await read('getClaimBatchDigest', [rows]), batchDigest);
  });
});
