import type { BilledPlan } from '../../metered/bill.ts';
import type { RunOptions } from '../../metered/run.ts';
import type { KeyRow } from '../../keys/api-keys.ts';
import type { ReserveOutcome } from '../../ledger/operations/reserve.ts';

/**
 * One request a payment can pay for, planned before any payment is looked at: its model and bound,
 * the path it was sent to (the offer's resource), the offer's description, how it can cost less
 * (for the over-limit 400), and how it runs once paid, billed against the payer's wallet.
 */
export interface PaidRequest {
  plan: Pick<BilledPlan, 'model' | 'reservationUsdc' | 'stream'>;
  path: string;
  description: string;
  shrink: string;
  /** The route and body an exact payment sent with this request is bound to (pay-per-request/request-digest.ts). */
  requestDigest: string;
  run(key: KeyRow, opts: RunOptions): Promise<ReserveOutcome>;
}
