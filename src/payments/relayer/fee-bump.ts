import type { Hex, PublicClient } from 'viem';

/** The replacement: the stuck transaction's fields, at the new fees. */
export interface Replacement {
  to: Hex;
  data: Hex;
  gas: bigint;
  nonce: number;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
}

/**
 * Bounds on bumping (unbounded, a gapped settlement is re-bumped every pass: its tip grew
 * ×2.28 in 8 passes). A bump is for a transaction next in line whose fee does not beat the market,
 * and nothing else: one whose nonce is above the relayer's mined count waits for an earlier nonce
 * (a gap), and a higher fee cannot get it mined; one already a bump (12.5%) above the market
 * estimate waits for a block. `bumpsSoFar` is how
 * many times this nonce was replaced already.
 */
export interface BumpLimits {
  maxBumps: number;
  maxFeePerGas: bigint;
  bumpsSoFar: number;
}

/**
 * Replaces a settlement the node holds but has not mined (priced below the market, for example
 * after a fee spike) by the same transaction (same nonce, recipient, calldata and gas limit) at a
 * higher fee. Nodes accept a replacement that raises both fees by at least 10%; this raises them by
 * 12.5%, or to the current estimate if that is higher, within the limits above. Only one of the
 * two can be mined (one nonce), so the payment is still settled once, whichever it is.
 *
 * Returns the replacement's hash, or null when there is nothing to replace (mined meanwhile, not
 * ours, or unknown to the node: dropped, which the reconciler releases instead) or nothing a
 * higher fee would help (see BumpLimits).
 */
export async function replaceWithHigherFee(
  client: Pick<PublicClient, 'getTransaction' | 'estimateFeesPerGas' | 'getTransactionCount'>,
  relayer: string,
  hash: Hex,
  limits: BumpLimits,
  send: (tx: Replacement) => Promise<Hex>,
): Promise<Hex | null> {
  let tx;
  try {
    tx = await client.getTransaction({ hash });
  } catch (err) {
    if ((err as { name?: string }).name === 'TransactionNotFoundError') return null;
    throw err;
  }
  if (tx.blockNumber !== null || tx.from.toLowerCase() !== relayer.toLowerCase() || !tx.to) return null;
  if (limits.bumpsSoFar >= limits.maxBumps) return null;
  const mined = await client.getTransactionCount({ address: tx.from, blockTag: 'latest' });
  if (tx.nonce !== mined) return null; // above: a gap, behind an earlier nonce; below: the nonce is used
  const market = await client.estimateFeesPerGas();
  const paidFee = tx.maxFeePerGas ?? tx.gasPrice ?? 0n;
  const paidTip = tx.maxPriorityFeePerGas ?? tx.gasPrice ?? 0n;
  // Already a bump above the market: raising it again is paying more for the same wait. So at a
  // steady market a settlement is bumped once, and again only when the market moves past it.
  if (paidFee * 8n >= market.maxFeePerGas * 9n && paidTip * 8n >= market.maxPriorityFeePerGas * 9n) return null;
  const raise = (was: bigint, now: bigint) => {
    const bumped = (was * 9n) / 8n + 1n;
    return bumped > now ? bumped : now;
  };
  const maxPriorityFeePerGas = raise(paidTip, market.maxPriorityFeePerGas);
  const raisedFee = raise(paidFee, market.maxFeePerGas);
  const maxFeePerGas = raisedFee > maxPriorityFeePerGas ? raisedFee : maxPriorityFeePerGas;
  if (maxFeePerGas > limits.maxFeePerGas) return null; // the operator's ceiling: wait for the market to come down
  return send({ to: tx.to, data: tx.input, gas: tx.gas, nonce: tx.nonce, maxFeePerGas, maxPriorityFeePerGas });
}
