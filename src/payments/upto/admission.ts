import { PERMIT2_ADDRESS } from '@x402/evm';
import { ApiError } from '../../refusal.ts';
import type { PaymentRow } from '../payment-store.ts';
import { microUsdcFor } from '../payment-terms.ts';

/**
 * What an upto payment must satisfy before anything is recorded, and the refusals of a payer whose
 * earlier upto payment is still open.
 */

/** Beyond the settle wait, how long an upto authorization must still be valid when its request starts: the request itself. */
export const UPTO_RUN_SECONDS = 60;

/**
 * The request runs and then its charge is settled under the authorization, which Permit2 refuses
 * after its deadline: a deadline too near would deliver an answer that can no longer be paid. The
 * stock client signs `now + maxTimeoutSeconds` (the offer's, topup.maxTimeoutSeconds), far beyond.
 */
export function uptoDeadlineProblem(validBefore: number, nowMs: number, settleWaitSeconds: number): string | null {
  const needed = settleWaitSeconds + UPTO_RUN_SECONDS;
  const left = validBefore - Math.floor(nowMs / 1000);
  if (left >= needed) return null;
  return `this upto authorization's deadline is ${left} s away; the request and its settle need at least ${needed} s. Sign the upto entry of a new 402 (the stock client signs its maxTimeoutSeconds ahead)`;
}

/** The payer's earlier upto payment is open: a second request of theirs is refused with what to do. */
export function openUptoRefusal(open: PaymentRow): ApiError {
  if (open.upto_state === 'unsettled') {
    const charge = open.settle_amount_atomic === null || open.token_decimals === null ? 'its charge' : `${microUsdcFor(BigInt(open.settle_amount_atomic), open.token_decimals)} micro-USDC`;
    return new ApiError(
      403,
      'UPTO_UNSETTLED',
      `wallet ${open.payer}'s upto payment ${open.id} for ${charge} could not be settled after its answer was delivered (${open.failure_reason ?? 'unknown reason'}); no payment of this wallet is taken until it is settled. Restore the Permit2 allowance (approve ${PERMIT2_ADDRESS} for the token) and the funds, then ask the gateway's operator to settle it again (tollgate admin upto retry ${open.id})`,
      { payment: open.id },
    );
  }
  return new ApiError(
    409,
    'UPTO_BUSY',
    `wallet ${open.payer} has an upto request still running or being settled (payment ${open.id}); upto runs one request at a time per wallet. Send this request again (the same payment may be sent) once that one has finished, or pay it with an exact entry of the 402`,
    { payment: open.id },
    { 'retry-after': '2' },
  );
}
