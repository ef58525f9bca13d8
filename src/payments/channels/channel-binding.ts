import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { paymentMismatch } from '../match.ts';
import type { Offer } from '../offers.ts';
import { parseChannelPayload, type ChannelPayload } from './channel-payload.ts';
import { CHANNEL_ERRORS } from './channel-types.ts';
import { channelIdOf } from './onchain-channel.ts';

/** A batch-settlement payment checked against the gateway's own offer: every term from the server's side, nothing from the echo. */
export interface BoundChannelPayment {
  offer: Offer;
  /** The server's own requirement (its batch-settlement entry for this request), for the facilitator. */
  requirements: PaymentRequirements;
  /** The v2 payload the facilitator gets: the checked inner payload under the server's own requirement. */
  payload: PaymentPayload;
  inner: ChannelPayload;
  channelId: `0x${string}`;
  network: string;
  /** The voucher's cumulative ceiling, micro-USDC. */
  maxClaimableUsdc: number;
  /** This request's ceiling (the offer's amount), micro-USDC. */
  ceilingUsdc: number;
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/**
 * A deposit's token authorization must be the kind the offer's token is deposited by
 * (extra.assetTransferMethod): the other kind names a function the token may not have, and no
 * collector would take it.
 */
function checkAuthorizationKind(inner: Extract<ChannelPayload, { type: 'deposit' }>, offer: Offer): void {
  const kind = inner.deposit.authorization.erc3009Authorization ? 'eip3009' : 'permit2';
  const wanted = offer.config.transferMethod;
  if (kind === wanted) return;
  const field = wanted === 'eip3009' ? 'erc3009Authorization' : 'permit2Authorization';
  throw paymentMismatch(
    `payload.deposit.authorization is a ${kind} authorization, but ${offer.requirements.asset} is deposited by ${wanted} ` +
      `(the offer's extra.assetTransferMethod): sign the deposit with a ${field}`,
  );
}

/**
 * Binds a batch-settlement payment to one of `offers` (the request's channel entries): the channel
 * config must name this gateway's receiver, receiver authorizer, token and withdrawal delay, and
 * hash to the channel id its voucher signs (the facilitator checks the same; the gateway checks it
 * first so a payload for another receiver or another channel never reaches the store). A mismatch
 * is a 400 that names the term and the spec's error code.
 */
export function bindChannelPayment(envelope: PaymentPayload, offers: Offer[]): BoundChannelPayment {
  const accepted = envelope.accepted;
  const offer = offers.find((o) => o.requirements.network === accepted.network && same(o.requirements.asset, accepted.asset));
  if (!offer) throw paymentMismatch(`no batch-settlement entry for ${accepted.asset} on ${accepted.network}; pay with an entry of the 402 response's accepts`);
  const { maxAmountRequired: _v1Amount, ...requirements } = offer.requirements;
  const inner = parseChannelPayload(envelope);
  // A refund answers the refund probe's entry, whose amount is no price: it pays for nothing.
  if (inner.type !== 'refund' && accepted.amount !== requirements.amount) {
    throw paymentMismatch(
      `the voucher is for a request ceiling of ${accepted.amount} units but this request's is ${requirements.amount}; sign the batch-settlement entry of a new 402 as it is`,
    );
  }
  const extra = requirements.extra as { receiverAuthorizer: string; withdrawDelay: number };
  const c = inner.channelConfig;
  if (!same(c.receiver, requirements.payTo)) throw paymentMismatch(`the channel pays ${c.receiver}, not this gateway's payTo ${requirements.payTo}`);
  if (!same(c.receiverAuthorizer, extra.receiverAuthorizer)) {
    throw paymentMismatch(
      `${CHANNEL_ERRORS.authorizerMismatch}: the channel's receiverAuthorizer is ${c.receiverAuthorizer}, not ${extra.receiverAuthorizer} as the offer says`,
    );
  }
  if (!same(c.token, requirements.asset)) throw paymentMismatch(`the channel's token is ${c.token}, not ${requirements.asset}`);
  if (inner.type === 'deposit') checkAuthorizationKind(inner, offer);
  if (c.withdrawDelay !== extra.withdrawDelay)
    throw paymentMismatch(`the channel's withdrawDelay is ${c.withdrawDelay}, not ${extra.withdrawDelay} as the offer says`);
  // Lower-case addresses hash the same and never fail a checksum: a mis-cased address is the payer's typo, not a 500.
  const lower = (a: string) => a.toLowerCase() as `0x${string}`;
  const { payer, payerAuthorizer, receiver, receiverAuthorizer, token, salt } = c;
  const hashed = { payer, payerAuthorizer, receiver, receiverAuthorizer, token, salt: lower(salt), withdrawDelay: c.withdrawDelay };
  for (const k of ['payer', 'payerAuthorizer', 'receiver', 'receiverAuthorizer', 'token'] as const) hashed[k] = lower(hashed[k]);
  const channelId = lower(channelIdOf(hashed, requirements.network));
  if (!same(channelId, inner.voucher.channelId)) {
    throw paymentMismatch(`${CHANNEL_ERRORS.channelIdMismatch}: the voucher names channel ${inner.voucher.channelId}, but its config hashes to ${channelId}`);
  }
  const maxClaimableUsdc = Number(inner.voucher.maxClaimableAmount);
  if (!Number.isSafeInteger(maxClaimableUsdc))
    throw paymentMismatch(`the voucher's maxClaimableAmount ${inner.voucher.maxClaimableAmount} is beyond any channel`);
  return {
    offer,
    requirements,
    payload: { x402Version: 2, accepted: requirements, payload: inner as unknown as Record<string, unknown> },
    inner,
    channelId,
    network: requirements.network,
    maxClaimableUsdc,
    ceilingUsdc: Number(requirements.amount),
  };
}
