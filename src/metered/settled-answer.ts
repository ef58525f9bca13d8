import { ApiError } from '../refusal.ts';
import type { SettleOutcome } from '../ledger/reservations.ts';
import type { Usage } from '../protocols/internal.ts';
import type { RequestBill } from './bill.ts';
import type { ChatDeps } from './deps.ts';
import type { ResponseSink } from './sink.ts';

/**
 * Settles a whole (non-streaming) answer before it is handed out, and sets the headers that say
 * what it cost: `x-tollgate-charged-usdc`, the balance it left (or `x-tollgate-billing: deferred`
 * when the settle was spooled) and whether the usage was estimated. Shared by chat completions and
 * embeddings, so every JSON answer is billed and labelled the same way.
 */
export async function settleWholeAnswer(deps: Pick<ChatDeps, 'balance'>, sink: ResponseSink, bill: RequestBill, usage: Usage): Promise<SettleOutcome> {
  const outcome = await bill.settle(usage);
  // The reservation was finished by someone else meanwhile (the sweeper after a lost lease, or a
  // shutdown that ran out of grace): nothing could be charged, so the answer is not handed out free.
  if (!outcome.applied) {
    throw new ApiError(
      503,
      'SERVICE_UNAVAILABLE',
      `this request's reservation was released before the provider answered, so nothing was charged and the answer is withheld; retry, and quote request id ${bill.requestId} if it repeats`,
    );
  }
  sink.header('content-type', 'application/json; charset=utf-8');
  sink.header('x-tollgate-charged-usdc', outcome.chargedUsdc);
  if (outcome.deferred) {
    // The database did not answer, but the bill is on local disk and applied when it does: the
    // answer exists and is paid for, so it is handed out; the balance is not known right now.
    sink.header('x-tollgate-billing', 'deferred');
  } else {
    // The settle reports the balance it left; read it only if it did not.
    sink.header('x-tollgate-balance-usdc', outcome.balanceUsdc ?? (await deps.balance(bill.key.wallet)));
  }
  sink.header('x-tollgate-usage-estimated', usage.estimated ? 'true' : 'false');
  return outcome;
}
