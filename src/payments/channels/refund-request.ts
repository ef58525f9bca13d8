import { usdToMicro } from '../../ledger/usd.ts';
import { paymentMismatch } from '../match.ts';
import type { PaidRequestDeps } from '../paid-request/deps.ts';
import type { AskForPayment, PaidOffer, PaidOutcome } from '../paid-request/outcome.ts';
import { bindChannelPayment } from './channel-binding.ts';
import { buildChannelOffers } from './channel-offer.ts';
import { isChannelPayment, parseChannelEnvelope, peekEnvelope } from './channel-payload.ts';
import { refundChannel } from './channel-refund.ts';
import { receiverAuthorizers } from './receiver-authorizer.ts';

/** Where a payer asks for its channel's unclaimed escrow back (the stock client's `refund(url)` probes it with GET). */
export const CHANNEL_REFUND_PATH = '/v1/channels/refund';

/**
 * The cooperative-refund endpoint. Without a payment: a 402 with this gateway's batch-settlement
 * entries (the channel parameters the stock client rebuilds its channel id from; the amount, the
 * least a request costs, pays for nothing here). With a `refund` payload: the refund
 * (channel-refund.ts). Any other payment is refused before anything reads it further: this
 * endpoint runs no request, so a voucher or a deposit here would pay for nothing.
 */
export async function channelRefundRequest(deps: PaidRequestDeps, payment: string | undefined): Promise<PaidOutcome> {
  const { config } = deps;
  const authorizerFor = await receiverAuthorizers(config, deps.topup.facilitator);
  const channelOffers = buildChannelOffers(config, usdToMicro(String(config.payPerRequest.minUsd)), authorizerFor);
  const paidOffer: PaidOffer = {
    resource: `${config.server.publicUrl.replace(/\/$/, '')}${CHANNEL_REFUND_PATH}`,
    path: CHANNEL_REFUND_PATH,
    accepts: channelOffers,
    description: "A cooperative refund of a batch-settlement channel's unclaimed escrow",
    fields: {},
  };
  const ask: AskForPayment = (code, message, fields = {}) => ({ kind: 'pay', offer: paidOffer, code, message, fields });
  if (payment === undefined) {
    return ask(
      'PAYMENT_REQUIRED',
      'send a batch-settlement refund payload (a zero-charge voucher) for one of accepts to get back what your channel has not spent',
    );
  }
  const envelope = peekEnvelope(payment);
  if (!isChannelPayment(envelope)) throw paymentMismatch('this endpoint takes only batch-settlement refund payloads');
  const bound = bindChannelPayment(parseChannelEnvelope(envelope), channelOffers);
  if (bound.inner.type !== 'refund') throw paymentMismatch(`this endpoint takes only refund payloads, not a ${bound.inner.type}: it runs no request`);
  return refundChannel(deps, bound, { paidOffer, ask });
}
