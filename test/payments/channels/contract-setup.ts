/**
 * A dev chain with the stand-in x402BatchSettlement and its collectors at their canonical addresses,
 * the local facilitator (its relayer is also the receiverAuthorizer), a receiver (payTo), and the
 * stock @x402/evm batch-settlement client to sign deposits and vouchers with: the setup of the
 * contract tests. No gateway: the tests call the facilitator as the gateway does.
 */
import type { PaymentPayload, PaymentRequirements, SettleResponse } from '@x402/core/types';
import type { BatchSettlementDepositPayload, BatchSettlementVoucherClaim, ChannelConfig } from '@x402/evm';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme, signVoucher } from '@x402/evm/batch-settlement/client';
import { x402Client } from '@x402/fetch';
import { createPublicClient, http, type Abi, type Address, type Hex, type PublicClient } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { BATCH_SETTLEMENT_ADDRESS, USDC_DOMAIN, USDT_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { channelIdOf, readOnchainChannel, readOnchainReceiver } from '../../../src/payments/channels/onchain-channel.ts';
import { localFacilitator } from '../../../src/payments/facilitator/local-facilitator.ts';
import { devChain, USD } from '../../support/topup-harness.ts';

export const WITHDRAW_DELAY = 900;
/** The deposit the 402 asks for (`extra.minDeposit`), and so the one the stock client signs. */
export const DEPOSIT = 5n * USD;

export type Token = 'usdc' | 'usdt';

export async function channelSetup() {
  const { anvil, chain } = await devChain();
  const [relayer, payTo] = [await chain.newAccount(), await chain.newAccount()];
  const network = chain.network as PaymentRequirements['network'];
  // The gateway's choice when it offers batch-settlement: the relayer's key signs as receiverAuthorizer.
  const facilitator = localFacilitator({
    relayerKey: relayer.privateKey,
    receiverAuthorizerKey: relayer.privateKey,
    rpcUrls: { [network]: anvil.rpcUrl },
    allowedFactories: [],
    confirmationTimeoutMs: 10_000,
  });
  const receiverAuthorizer = relayer.address;
  const reader = createPublicClient({ chain: chain.chain, transport: http(anvil.rpcUrl) }) as PublicClient;
  const assetOf = (token: Token) => (token === 'usdc' ? chain.usdc : chain.usdt);

  // What the gateway's 402 offers: USDC by EIP-3009, USDT by Permit2 (Tether has no EIP-3009).
  const requirements = (amount: bigint, token: Token = 'usdc'): PaymentRequirements => ({
    scheme: 'batch-settlement',
    network,
    asset: assetOf(token),
    amount: amount.toString(),
    payTo: payTo.address,
    maxTimeoutSeconds: 300,
    extra: {
      receiverAuthorizer,
      withdrawDelay: WITHDRAW_DELAY,
      minDeposit: DEPOSIT.toString(),
      ...(token === 'usdc' ? USDC_DOMAIN : { ...USDT_DOMAIN, assetTransferMethod: 'permit2' }),
    },
  });

  /** A payer holding `usd` of both tokens, Permit2 approved for USDT (the one-time approval a Permit2 payer makes). */
  const payer = async (usd = 100n) => {
    const account = await chain.newAccount({ usdc: usd * USD, usdt: usd * USD });
    await chain.approvePermit2(account, chain.usdt);
    return account;
  };

  /** The stock client's first payment of a channel (a deposit and its first voucher), as an agent's x402 client makes it. */
  const signDeposit = async (account: FundedAccount, accepted: PaymentRequirements, salt?: Hex): Promise<PaymentPayload> => {
    const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, reader), salt ? { salt } : undefined);
    const client = new x402Client().register('eip155:*', scheme);
    client.setSpendControls({
      allowedAssets: [chain.usdc, chain.usdt].map((asset) => ({ network, asset, maxAmountPerPayment: (10n * USD).toString() })),
    });
    return client.createPaymentPayload({
      x402Version: 2,
      resource: { url: 'http://gateway.test/v1/chat/completions', description: 'metered', mimeType: 'application/json' },
      accepts: [accepted],
    });
  };

  /** Signs with the stock client and settles the deposit through the facilitator (verify first, as the gateway does). */
  const openChannel = async (account: FundedAccount, token: Token = 'usdc', salt?: Hex) => {
    const accepted = requirements(USD / 100n, token);
    const payload = await signDeposit(account, accepted, salt);
    const verified = await facilitator.verify(payload, accepted);
    if (!verified.isValid) throw new Error(`deposit refused at verify: ${verified.invalidReason}`);
    const settled = await facilitator.settle(payload, accepted);
    if (!settled.success) throw new Error(`deposit failed: ${settled.errorReason} ${settled.errorMessage ?? ''}`);
    const inner = payload.payload as unknown as BatchSettlementDepositPayload;
    return { payload, settled, config: inner.channelConfig, channelId: inner.voucher.channelId as Hex, accepted };
  };

  /** A cumulative voucher, signed by the stock client's signVoucher. */
  const voucher = (account: FundedAccount, channelId: Hex, maxClaimable: bigint) => signVoucher(account, channelId, maxClaimable.toString(), network);

  const claimRow = async (
    account: FundedAccount,
    config: ChannelConfig,
    maxClaimable: bigint,
    totalClaimed = maxClaimable,
  ): Promise<BatchSettlementVoucherClaim> => {
    const v = await voucher(account, channelIdOf(config, network), maxClaimable);
    return { voucher: { channel: config, maxClaimableAmount: v.maxClaimableAmount }, signature: v.signature, totalClaimed: totalClaimed.toString() };
  };

  /** What the gateway's background claimer sends: one claim payload over many channels; the facilitator signs as receiverAuthorizer. */
  const claim = (claims: BatchSettlementVoucherClaim[], token: Token = 'usdc'): Promise<SettleResponse> => settleAction({ type: 'claim', claims }, token);
  const settle = (token: Token = 'usdc'): Promise<SettleResponse> => settleAction({ type: 'settle', receiver: payTo.address, token: assetOf(token) }, token);
  /** The completed refund payload the gateway builds from the payer's refund request (zero-charge voucher at `charged`). */
  const refund = async (account: FundedAccount, config: ChannelConfig, charged: bigint, amount: bigint, claims: BatchSettlementVoucherClaim[] = []) => {
    const channelId = channelIdOf(config, network);
    const state = await readOnchainChannel(reader, channelId);
    const v = await voucher(account, channelId, charged);
    return settleAction(
      { type: 'refund', channelConfig: config, voucher: v, amount: amount.toString(), refundNonce: state.refundNonce.toString(), claims },
      config.token.toLowerCase() === chain.usdt.toLowerCase() ? 'usdt' : 'usdc',
    );
  };
  const settleAction = (inner: Record<string, unknown>, token: Token): Promise<SettleResponse> => {
    const accepted = requirements(1n, token);
    return facilitator.settle({ x402Version: 2, accepted, payload: inner }, accepted);
  };

  const channel = (config: ChannelConfig) => readOnchainChannel(reader, channelIdOf(config, network));
  const receiverTotals = (token: Token = 'usdc') => readOnchainReceiver(reader, payTo.address, assetOf(token));
  const balance = (token: Token, who: string) => chain.balanceOf(assetOf(token), who as Hex);
  const gasUsed = async (hash: string) => (await reader.getTransactionReceipt({ hash: hash as Hex })).gasUsed;
  const contractHolds = (token: Token) => balance(token, BATCH_SETTLEMENT_ADDRESS);

  // The contract called directly, without the facilitator: what it refuses, whoever sends it.
  const settlementAbi = artifacts.StandInBatchSettlement.abi as Abi;
  const simulate = (from: FundedAccount, functionName: string, args: unknown[], address: Address = BATCH_SETTLEMENT_ADDRESS) =>
    chain.client(from).simulateContract({ address, abi: settlementAbi, functionName, args });
  const send = async (from: FundedAccount, functionName: string, args: unknown[]) => {
    const hash = await chain.client(from).writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi: settlementAbi, functionName, args });
    return chain.client(from).waitForTransactionReceipt({ hash });
  };

  return {
    anvil,
    chain,
    network,
    relayer,
    payTo,
    facilitator,
    reader,
    requirements,
    payer,
    signDeposit,
    openChannel,
    voucher,
    claimRow,
    claim,
    settle,
    refund,
    channel,
    receiverTotals,
    balance,
    gasUsed,
    contractHolds,
    simulate,
    send,
  };
}

export type ChannelSetup = Awaited<ReturnType<typeof channelSetup>>;
