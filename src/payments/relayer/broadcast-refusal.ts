import { FacilitatorUnavailable } from '../facilitator/facilitator.ts';
import { someErrorInChain } from '../../outage.ts';

/**
 * A node's refusal to take the relayer's transaction: the relayer's nonce, fees or gas money, not
 * the payer's authorization. Nothing was sent, so the same payment can be sent again (503); it must
 * never be answered as a rejection that tells the payer to sign a new payment.
 */
export class RelayerCouldNotSend extends FacilitatorUnavailable {
  override name = 'RelayerCouldNotSend';
}

/** The node's words (geth, anvil, reth, erigon) and viem's error names for these refusals, with a short label for logs and answers. */
const REFUSALS: Array<[RegExp, string]> = [
  [/nonce too low|nonce provided for the transaction is lower|NonceTooLowError/i, 'nonce too low'],
  [/nonce too high|nonce provided for the transaction is higher|NonceTooHighError|NonceMaxValueError/i, 'nonce too high'],
  [/replacement transaction underpriced|ReplacementUnderpriced/i, 'replacement underpriced'],
  [/already known|\bknown transaction|AlreadyKnown/i, 'transaction already known'],
  [/insufficient funds|InsufficientFundsError/i, "the relayer's native balance does not cover the gas"],
  [/transaction underpriced|max fee per gas less than block base fee|FeeCapTooLowError|TipAboveFeeCapError/i, 'fee too low'],
];

/** The label of a relayer-side refusal anywhere in the error's cause chain, or null. */
export function relayerRefusal(err: unknown): string | null {
  let found: string | null = null;
  // The cycle-safe walk: a cause chain that loops must not hang the payment path.
  someErrorInChain(err, (e) => {
    const text = `${e.name ?? ''} ${(e as { details?: unknown }).details ?? ''} ${e.message ?? ''}`;
    found = REFUSALS.find(([pattern]) => pattern.test(text))?.[1] ?? null;
    return found !== null;
  });
  return found;
}
