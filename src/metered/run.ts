import type { KeyRow } from '../keys/api-keys.ts';
import type { ReserveOutcome } from '../ledger/operations/reserve.ts';
import { RequestBill, type BillOptions } from './bill.ts';
import { completeChat } from './complete.ts';
import type { ChatDeps } from './deps.ts';
import type { InboundTranslator } from '../protocols/inbound.ts';
import type { ChatPlan } from './plan/plan.ts';
import type { AnswerKeeper, ResponseSink } from './sink.ts';
import { streamChat } from './stream.ts';

/** What running a request returns: its reservation, or why the ledger refused it (nothing was sent). */
export type RunOutcome = ReserveOutcome;

/** How a request runs: its bill's options, and what may cut it short. */
export interface RunOptions extends BillOptions {
  /**
   * Aborted when the request must be over at once (an upto payment's deadline leaves only the time
   * to settle it, src/payments/paid-request/upto.ts): a stream is then drained and billed like one whose
   * client left (its client is cut), but a non-streamed call still under way is aborted and voided, since
   * its answer could be neither delivered nor settled in time.
   */
  cut?: AbortSignal;
}

/** The request being run: its id, where its answer goes, and the protocol it is written in. */
export interface ChatExchange {
  requestId: string;
  sink: ResponseSink;
  inbound: InboundTranslator;
  /** Keeps the billed answer before it is delivered (a stored Response); absent: nothing is kept. */
  keeper?: AnswerKeeper;
}

/**
 * Reserves the plan's bound on the key's wallet, then runs the request and finishes its bill exactly
 * once. A refused outcome, with nothing sent and nothing reserved, when the available balance or the
 * key's spend limit cannot cover the reservation: each caller words that refusal its own way (a keyed
 * request says top up or names the limit, a pay-per-request one offers a payment).
 */
export async function runChat(deps: ChatDeps, exchange: ChatExchange, key: KeyRow, plan: ChatPlan, opts: RunOptions = {}): Promise<ReserveOutcome> {
  const { requestId, sink, inbound, keeper } = exchange;
  const reserved = await deps.reserve({
    wallet: key.wallet,
    apiKeyId: key.id,
    requestId,
    amountUsdc: plan.reservationUsdc,
    keyHasLimit: key.spend_limit_usdc !== null,
  });
  if (!reserved.ok) return reserved;

  // A capped key's limit admitted exactly this reservation: a provider reporting more usage than
  // the request could use (or a bound that missed an input) must not take the key past its limit.
  const bill = new RequestBill(deps, key, plan, requestId, { ...opts, capAtReservation: opts.capAtReservation || reserved.keyLimited });
  try {
    if (plan.stream) await streamChat(deps, sink, inbound, plan, bill, keeper);
    else await completeChat(deps, sink, inbound, plan, bill, keeper, opts.cut);
  } finally {
    await bill.voidIfOpen('error');
  }
  return reserved;
}
