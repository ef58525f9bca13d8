import assert from 'node:assert/strict';
import type { PaymentRequirements } from '@x402/core/types';
import { erc20Abi, type Hex } from 'viem';
import { USDC_DOMAIN, type FundedAccount } from '../../src/devchain/deploy.ts';
import { USD, type TopupHarness } from './topup-harness.ts';
import { until } from './until.ts';
import { signEip3009, v2Header } from './x402-payloads.ts';

/** Fees that put a transaction ahead of the relayer's settlement in the next block. */
export const OUTBIDDING = { maxPriorityFeePerGas: 500n * 10n ** 9n, maxFeePerGas: 1000n * 10n ** 9n };

/** The gateway's payment row of `payer` (the one payment it made in the test), if any. */
export const paymentOf = (h: TopupHarness, payer: FundedAccount) =>
  h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).executeTakeFirst();

/** The gateway's chain reader. */
export const chainReader = (h: TopupHarness) => h.gw.services.topup!.clientFor(h.chain.network)!;

/** Sends all of `from`'s USDC to `to` (with `fees`, else the node's); returns the transaction's hash, unmined. */
export async function moveAllUsdc(h: TopupHarness, from: FundedAccount, to: `0x${string}`, fees: typeof OUTBIDDING | object = {}): Promise<Hex> {
  const amount = await h.chain.balanceOf(h.chain.usdc, from.address);
  return h.chain.client(from).writeContract({
    address: h.chain.usdc,
    abi: erc20Abi,
    functionName: 'transfer',
    args: [to, amount],
    chain: h.chain.chain,
    account: from,
    gas: 100_000n,
    ...fees,
  });
}

/** A 5 USD top-up of `payer` by EIP-3009, as the header a client sends. */
export async function fiveUsdTopup(h: TopupHarness, offer: PaymentRequirements, payer: FundedAccount): Promise<string> {
  return v2Header(
    offer,
    await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
  );
}

/**
 * A 5 USD top-up whose settlement reverted on chain: the payer's transfer of all its funds away
 * outbid it into the same block (402, the payment failed); then the payer is funded again, so its
 * authorization, public in the reverted transaction's calldata, could land.
 */
export async function revertedTopup(h: TopupHarness, offer: PaymentRequirements): Promise<{ payer: FundedAccount; header: string; revertedHash: Hex }> {
  const payer = await h.payer(5n);
  const sink = await h.chain.newAccount();
  const header = await fiveUsdTopup(h, offer, payer);
  await h.anvil.rpc('evm_setAutomine', [false]);
  try {
    const posted = h.post({ amount: 5 }, { 'payment-signature': header });
    await until(async () => Boolean((await paymentOf(h, payer))?.tx_hash), 'the settlement sent');
    await moveAllUsdc(h, payer, sink.address, OUTBIDDING);
    await h.anvil.rpc('evm_mine');
    const answer = await posted;
    assert.equal(answer.status, 402, answer.text);
  } finally {
    await h.anvil.rpc('evm_setAutomine', [true]);
  }
  const failed = (await paymentOf(h, payer))!;
  assert.equal(failed.state, 'failed');
  assert.equal(await h.balance(payer.address), 0);
  const revertedHash = failed.tx_hash as Hex;
  assert.equal((await chainReader(h).getTransactionReceipt({ hash: revertedHash })).status, 'reverted', 'the settlement reverted on chain');
  await chainReader(h).waitForTransactionReceipt({ hash: await moveAllUsdc(h, sink, payer.address) });
  return { payer, header, revertedHash };
}

/** Sends `raw` calldata to its contract from a stranger's account, as anyone reading the chain could; returns once mined. */
export async function landedByStranger(h: TopupHarness, to: `0x${string}`, data: Hex): Promise<Hex> {
  const stranger = await h.chain.newAccount();
  const landed = await h.chain.client(stranger).sendTransaction({ to, data, account: stranger, chain: h.chain.chain, gas: 200_000n });
  assert.equal((await chainReader(h).waitForTransactionReceipt({ hash: landed })).status, 'success');
  return landed;
}
