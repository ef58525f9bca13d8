import { ApiError } from '../../refusal.ts';
import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import type { PaymentRow } from '../payment-store.ts';
import { microUsdcFor } from '../payment-terms.ts';
import { openUptoOf } from './upto-store.ts';
import { whatRestores } from './what-restores.ts';

/**
 * What an upto payment must satisfy before anything is recorded, and the refusals of a payer whose
 * earlier upto payment is still open.
 */

/** How long an upto request must be able to run, at least, before it is cut for its settle. */
export const UPTO_RUN_SECONDS = 60;

/** Slack between the end of a cut request's drain and its settle's deadline (a block, clocks). */
export const UPTO_SETTLE_MARGIN_SECONDS = 10;

/**
 * When an upto request must be over (ms since the epoch): its charge is settled under the
 * authorization after the request, and Permit2 refuses it after its deadline. So the request is cut
 * (its client disconnected: a stream is drained and billed for what was produced, as for any client
 * that leaves) this long before the deadline: the drain bound (chat.drainTimeoutSeconds), the
 * settle's receipt wait (topup.settleWaitSeconds) and a margin.
 */
export function uptoRunUntil(validBefore: number, settleWaitSeconds: number, drainTimeoutSeconds: number): number {
  return (validBefore - settleWaitSeconds - drainTimeoutSeconds - UPTO_SETTLE_MARGIN_SECONDS) * 1000;
}

/**
 * A deadline that leaves the request less than `minRunSeconds` (UPTO_RUN_SECONDS, or more: below)
 * before it would be cut is refused before anything is recorded. The stock client signs `now +
 * maxTimeoutSeconds` (the offer's, topup.maxTimeoutSeconds, 300 s by default), far beyond.
 */
export function uptoDeadlineProblem(runUntil: number, nowMs: number, validBefore: number, minRunSeconds = UPTO_RUN_SECONDS): string | null {
  const left = Math.floor((runUntil - nowMs) / 1000);
  if (left >= minRunSeconds) return null;
  const needed = minRunSeconds + Math.floor(validBefore - runUntil / 1000);
  return `this upto authorization's deadline is ${validBefore - Math.floor(nowMs / 1000)} s away; the request and its settle need at least ${needed} s. Sign the upto entry of a new 402 (the stock client signs its maxTimeoutSeconds ahead)`;
}

/** Room above the offer's maxTimeoutSeconds for a payer whose clock runs ahead of the gateway's. */
export const UPTO_DEADLINE_SLACK_SECONDS = 300;

/**
 * A deadline further ahead than the offer asked (topup.maxTimeoutSeconds, plus clock slack) is
 * refused before anything is recorded. The stock client signs exactly maxTimeoutSeconds ahead; a
 * later deadline is a hand-rolled client's, and it would unbind what the deadline bounds: a settle
 * stuck in the pool is given up only at its deadline (reconcile-upto.ts), and until then the payer's
 * later requests are refused as busy and the operator's `upto retry` and `write-off` cannot act.
 */
export function uptoDeadlineTooFar(nowMs: number, validBefore: number, maxTimeoutSeconds: number): string | null {
  const ahead = validBefore - Math.floor(nowMs / 1000);
  if (ahead <= maxTimeoutSeconds + UPTO_DEADLINE_SLACK_SECONDS) return null;
  return `this upto authorization's deadline is ${ahead} s away, beyond the ${maxTimeoutSeconds} s this gateway offers (accepts[].maxTimeoutSeconds). Sign the upto entry of a new 402 as it is (the stock client signs its maxTimeoutSeconds ahead)`;
}

/**
 * How long an upto request must be able to run before its cut. An answer that is not streamed
 * cannot be drained: a cut aborts it, the operator's provider having done the work for nothing. So
 * it must have room for the whole answer, the first-byte timeout (`chat.firstByteTimeoutSeconds`,
 * which bounds a whole answer's wait): admitted with less, a payer could sign short deadlines and
 * have long answers generated and cut, again and again, at no cost to itself.
 */
export function uptoMinRunSeconds(stream: boolean, firstByteTimeoutSeconds: number): number {
  return stream ? UPTO_RUN_SECONDS : Math.max(UPTO_RUN_SECONDS, firstByteTimeoutSeconds);
}

/** When the refusal is said and how often the reconciler retries (topup.reconcileIntervalSeconds): what-restores.ts. */
export interface RefusalClock {
  nowMs: number;
  retryEverySeconds: number;
}

const DEFAULT_CLOCK = (): RefusalClock => ({ nowMs: Date.now(), retryEverySeconds: 30 });

/**
 * A wallet whose upto payment could not be settled pays nothing more (an exact pay-per-request
 * payment, a top-up) until it is settled or written off. Call only once the payment's signature is
 * known to be the payer's: the refusal names the payment, its charge and its reason, which nobody
 * but the wallet's owner may learn from a header.
 */
export async function refuseIfUptoUnsettled(db: Kysely<Database>, payer: string, clock: RefusalClock = DEFAULT_CLOCK()): Promise<void> {
  const open = await openUptoOf(db, payer);
  if (open?.upto_state === 'unsettled') throw openUptoRefusal(open, clock);
}

/** The payer's earlier upto payment is open: a second request of theirs is refused with what to do. */
export function openUptoRefusal(open: PaymentRow, clock: RefusalClock = DEFAULT_CLOCK()): ApiError {
  if (open.upto_state === 'unsettled') {
    const charge =
      open.settle_amount_atomic === null || open.token_decimals === null
        ? 'its charge'
        : `${microUsdcFor(BigInt(open.settle_amount_atomic), open.token_decimals)} micro-USDC`;
    return new ApiError(
      403,
      'UPTO_UNSETTLED',
      `wallet ${open.payer}'s upto payment ${open.id} for ${charge} could not be settled after its answer was delivered (${open.failure_reason ?? 'unknown reason'}); no payment of this wallet is taken until it is settled. ${whatRestores(open, clock.nowMs, clock.retryEverySeconds)}`,
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
