import assert from 'node:assert/strict';
import { keccak256, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { TopupHarness } from './topup-harness.ts';

/**
 * The relayer's settlement transaction `hash`, signed again byte for byte (the same nonce, fees and
 * data, so the same hash): what another node of a load-balanced endpoint still holds after this
 * one dropped it, ready to come back.
 */
export async function resignRelayerTransaction(h: TopupHarness, hash: string): Promise<Hex> {
  const tx = await h.anvil.rpc<{ nonce: string; to: Hex; input: Hex; gas: string; maxFeePerGas: string; maxPriorityFeePerGas: string }>(
    'eth_getTransactionByHash',
    [hash],
  );
  const raw = await privateKeyToAccount(h.relayer.privateKey as Hex).signTransaction({
    type: 'eip1559',
    chainId: h.anvil.chainId,
    nonce: Number(tx.nonce),
    to: tx.to,
    data: tx.input,
    gas: BigInt(tx.gas),
    maxFeePerGas: BigInt(tx.maxFeePerGas),
    maxPriorityFeePerGas: BigInt(tx.maxPriorityFeePerGas),
    value: 0n,
  });
  assert.equal(keccak256(raw), hash, 'the very same transaction');
  return raw;
}

/**
 * A top-up whose settlement is sent but never mined (automine off), answered 202, then dropped by
 * the node: returns the raw transaction, so a test can bring it back later as another node would.
 */
export async function topupThenDropSettlement(h: TopupHarness, header: string): Promise<Hex> {
  await h.anvil.rpc('evm_setAutomine', [false]);
  try {
    const pending = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(pending.status, 202, pending.text);
    const raw = await resignRelayerTransaction(h, pending.body.transaction);
    await h.anvil.rpc('anvil_dropTransaction', [pending.body.transaction]);
    return raw;
  } finally {
    await h.anvil.rpc('evm_setAutomine', [true]);
  }
}
