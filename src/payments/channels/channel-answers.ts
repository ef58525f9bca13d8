import type { PaidOffer, PaidOutcome, AskForPayment } from '../paid-request/outcome.ts';
import type { BoundChannelPayment } from './channel-binding.ts';
import { correctiveOffer } from './channel-offer.ts';
import type { ChannelRow } from './channel-store.ts';
import { CHANNEL_ERRORS, type ChannelErrorCode } from './channel-types.ts';

/** The 402s the channel path answers with, besides a run: its request's offer, with the channel's state where the spec asks for it. */
export interface ChannelAnswers {
  paidOffer: PaidOffer;
  ask: AskForPayment;
}

export function rejected(a: ChannelAnswers, reason: string, what = 'the batch-settlement payment was rejected'): PaidOutcome {
  return a.ask('PAYMENT_REJECTED', `${what} (${reason}); nothing was charged and nothing moved`, { reason });
}

/**
 * The corrective 402 (spec, "Corrective 402"): the entry the payment answered carries the channel's
 * state and its latest signed voucher, so the stock client checks that signature against its own
 * key, adopts the server's charged amount and signs again.
 */
export function corrective(a: ChannelAnswers, bound: BoundChannelPayment, row: ChannelRow, code: ChannelErrorCode, message: string): PaidOutcome {
  const accepts = a.paidOffer.accepts.map((o) => (o === bound.offer ? correctiveOffer(o, row) : o));
  const fields = { channel_id: bound.channelId, charged_cumulative_usdc: row.charged_usdc };
  return { kind: 'pay', offer: { ...a.paidOffer, accepts }, code, message, fields };
}

/** Another request holds the channel: the spec's busy answer, with the channel's state, to try again shortly. */
export function busy(a: ChannelAnswers, bound: BoundChannelPayment, row: ChannelRow): PaidOutcome {
  const message = 'another request on this channel is running; requests on one channel run one at a time: send this one again when it has finished';
  return corrective(a, bound, row, CHANNEL_ERRORS.busy, message);
}
