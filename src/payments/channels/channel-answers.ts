import type { Facilitator } from '../facilitator/facilitator.ts';
import type { PaidOffer, PaidOutcome, AskForPayment } from '../paid-request/outcome.ts';
import type { BoundChannelPayment } from './channel-binding.ts';
import { correctiveOffer, statedAsIs, type StatedChannel } from './channel-offer.ts';
import type { ChannelRow } from './channel-store.ts';
import { CHANNEL_ERRORS, type ChannelErrorCode } from './channel-types.ts';
import { signedByPayer } from './payer-proof.ts';

/** The 402s the channel path answers with, besides a run: its request's offer, with the channel's state where the spec asks for it. */
export interface ChannelAnswers {
  paidOffer: PaidOffer;
  ask: AskForPayment;
}

/** Why a payload its channel's payer did not sign is refused (it learns nothing of the channel). */
export const NOT_SIGNED_BY_PAYER = `${CHANNEL_ERRORS.voucherSignature}: the voucher is not signed by the channel's payer authorizer`;

export function rejected(a: ChannelAnswers, reason: string, what = 'the batch-settlement payment was rejected'): PaidOutcome {
  return a.ask('PAYMENT_REJECTED', `${what} (${reason}); nothing was charged and nothing moved`, { reason });
}

/**
 * The corrective 402 (spec, "Corrective 402"): the entry the payment answered carries the channel's
 * state and its latest signed voucher (or `stated`: see batch-settlement.ts), so the stock client
 * checks that signature against its own key, adopts the stated charged amount and signs again. Only
 * for a payload the channel's payer signed (payer-proof.ts): anyone else learns nothing of the
 * channel and is refused plainly.
 */
export async function corrective(
  a: ChannelAnswers,
  facilitator: Facilitator,
  bound: BoundChannelPayment,
  row: ChannelRow,
  code: ChannelErrorCode,
  message: string,
  stated: StatedChannel = statedAsIs(row),
): Promise<PaidOutcome> {
  if (!(await signedByPayer(facilitator, bound))) return notThePayers(a, code);
  const accepts = a.paidOffer.accepts.map((o) => (o === bound.offer ? correctiveOffer(o, row, stated) : o));
  const fields = { channel_id: bound.channelId, charged_cumulative_usdc: stated.chargedUsdc };
  return { kind: 'pay', offer: { ...a.paidOffer, accepts }, code, message, fields };
}

/** Another request holds the channel: the spec's busy answer, with the channel's state (to its payer), to try again shortly. */
export function busy(a: ChannelAnswers, facilitator: Facilitator, bound: BoundChannelPayment, row: ChannelRow): Promise<PaidOutcome> {
  const message = 'another request on this channel is running; requests on one channel run one at a time: send this one again when it has finished';
  return corrective(a, facilitator, bound, row, CHANNEL_ERRORS.busy, message);
}

function notThePayers(a: ChannelAnswers, code: ChannelErrorCode): PaidOutcome {
  if (code === CHANNEL_ERRORS.busy) {
    const message = 'another request on this channel is running; send this one again when it has finished';
    return { kind: 'pay', offer: a.paidOffer, code, message, fields: {} };
  }
  return rejected(a, NOT_SIGNED_BY_PAYER);
}
