import type { Hex, PublicClient } from 'viem';

/**
 * Replaces a settlement the node holds but has not mined (priced below the market, for example
 * after a fee spike) by the same transaction (same nonce, recipient, calldata and gas limit) at a
 * higher fee. Nodes accept a replacement that raises both fees by at least 10%; this raises them by
 * 12.5%, or to the current estimate if that is higher. Only one of the two can be mined (one
 * nonce), so the payment is still settled once, whichever it is.
 *
 * Returns the replacement's hash, or null when there is nothing to replace (mined meanwhile, not
 * ours, or unknown to the node: dropped, which the reconciler releases instead).
 */
/** The replacement: the stuck transaction's fields, at the new fees. */
export interface Replacement {
  to: Hex;
  data: Hex;
  gas: bigint;
  nonce: number;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

export async function replaceWithHigherFee(client: Pick<PublicClient, 'getTransaction' | 'estimateFeesPerGas'>, relayer: string, hash: Hex, send: (tx: Replacement) => Promise<Hex>): Promise<Hex | null> {
  let tx;
  try {
    tx = await client.getTransaction({ hash });
  } catch (err) {
    if ((err as { name?: string }).name === 'TransactionNotFoundError') return null;
    throw err;
  }
  if (tx.blockNumber !== null || tx.from.toLowerCase() !== relayer.toLowerCase() || !tx.to) return null;
  const market = await client.estimateFeesPerGas();
  const raise = (was: bigint | undefined, now: bigint) => {
    const bumped = ((was ?? 0n) * 9n) / 8n + 1n;
    return bumped > now ? bumped : now;
  };
  const maxPriorityFeePerGas = raise(tx.maxPriorityFeePerGas ?? tx.gasPrice, market.maxPriorityFeePerGas);
  const maxFeePerGas = raise(tx.maxFeePerGas ?? tx.gasPrice, market.maxFeePerGas);
  return send({
    to: tx.to,
    data: tx.input,
    gas: tx.gas,
    nonce: tx.nonce,
    maxFeePerGas: maxFeePerGas > maxPriorityFeePerGas ? maxFeePerGas : maxPriorityFeePerGas,
    maxPriorityFeePerGas,
  });
}
