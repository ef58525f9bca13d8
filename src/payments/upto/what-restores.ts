import { PERMIT2_ADDRESS } from '@x402/evm';
import { deadlineText } from '../../ledger/deadline-text.ts';
import type { PaymentRow } from '../payment-store.ts';

/**
 * What clears a wallet refused for an unsettled upto payment, said to its owner in the 403
 * UPTO_UNSETTLED and to the operator in the log. The settle moves the charge, never the maximum
 * (relayer/upto-charge-settle.ts), so the wallet needs the charge and a Permit2 allowance of the
 * charge, in that token. While the authorization is valid the reconciler tries it again by itself
 * (reconcile-upto.ts): restoring the wallet is enough. Past its deadline the signature can no
 * longer move anything, and only the operator can clear it.
 */
export function whatRestores(p: PaymentRow, nowMs: number, retryEverySeconds: number): string {
  const units = p.settle_amount_atomic ?? '0';
  const amount = p.token_decimals === null ? `${units} token units` : `${formatUnits(BigInt(units), p.token_decimals)} (${units} token units)`;
  const deadline = deadlineText(p.valid_before);
  if (nowMs / 1000 < p.valid_before) {
    return (
      `Hold at least ${amount} of token ${p.asset} on ${p.network} in ${p.payer} ` +
      `and approve Permit2 (${PERMIT2_ADDRESS}) for at least that much on that token before ${deadline}, when this authorization expires: ` +
      `the gateway settles it again by itself within about ${retryEverySeconds} s and this wallet is free. ` +
      `Its operator can also settle it at once (tollgate admin upto retry ${p.id})`
    );
  }
  return (
    `Its authorization expired at ${deadline} without being settled, so it can no longer move anything: only the gateway's operator can clear it ` +
    `(tollgate admin upto retry ${p.id} if the chain shows the charge paid after all, or tollgate admin upto write-off ${p.id})`
  );
}

/** Token units as a decimal number of tokens (6 decimals: 12300 → "0.0123"). */
export function formatUnits(units: bigint, decimals: number): string {
  const scale = 10n ** BigInt(decimals);
  const fraction = (units % scale).toString().padStart(decimals, '0').replace(/0+$/, '');
  return fraction ? `${units / scale}.${fraction}` : `${units / scale}`;
}
