import { encodePaymentRequiredHeader, encodePaymentResponseHeader } from '@x402/core/http';
import type { SettleResponse } from '@x402/core/types';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import type { Services } from '../../services.ts';
import { ApiError } from '../../refusal.ts';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../../outage.ts';
import { invalidPayment } from '../../payments/decode.ts';
import { paymentRequired, TOPUP_DESCRIPTION, type Offer } from '../../payments/offers.ts';
import type { PaymentRow } from '../../payments/payment-row.ts';
import { paymentRequiredV1 } from '../../payments/x402-v1.ts';
import { noteRefusal } from '../refusal-log.ts';
import { SIGN_IN_WITH_X } from '../../siwe/siwx.ts';
import type { SettleMatchedDeps } from '../../payments/settle-matched.ts';

/**
 * The x402 side of HTTP shared by every paid endpoint (top-ups, pay-per-request chat): where the
 * payment comes from, how a 402 offer and a receipt are written, and what the one settle path
 * (payments/settle-matched.ts) needs, so both endpoints take and credit payments in exactly the same way.
 */

/** The payment header, x402 v2 (`PAYMENT-SIGNATURE`) or v1 (`X-Payment`); undefined when none was sent. */
export function paymentHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers['payment-signature'] ?? headers['x-payment'];
  if (Array.isArray(value)) throw invalidPayment('send exactly one payment header');
  return value;
}

/** The `sign-in-with-x` header (x402's SIWX extension); undefined when none was sent. */
export function siwxHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers[SIGN_IN_WITH_X];
  if (Array.isArray(value)) throw new ApiError(400, 'VALIDATION_ERROR', 'send exactly one sign-in-with-x header');
  return value;
}

/**
 * 402 with the offers in PAYMENT-REQUIRED (x402 v2, what @x402/fetch 2.x reads first) and in the
 * body: the same v2 offer, or with `v1Body` (topup.x402v1Body) an x402 v1 PaymentRequired for the
 * stock v1 clients, which read only the body (payments/x402-v1.ts).
 */
export function askForPayment(
  reply: FastifyReply,
  p: { resource: string; offers: Offer[]; code: string; message: string; description?: string; v1Body: boolean; extensions?: Record<string, unknown> },
  extra: Record<string, unknown> = {},
) {
  const description = p.description ?? TOPUP_DESCRIPTION;
  // x402 v2 only: v1 has no extensions, and its clients read only the body's accepts.
  const required = { ...paymentRequired(p.resource, p.offers, p.code, description), ...(p.extensions ? { extensions: p.extensions } : {}) };
  const body = p.v1Body ? paymentRequiredV1(p.resource, p.offers, p.code, description) : required;
  noteRefusal(reply, p.code);
  return reply
    .code(402)
    .header('payment-required', encodePaymentRequiredHeader(required))
    .send({ ...body, message: p.message, ...extra });
}

/** Sets PAYMENT-RESPONSE and its v1 name X-PAYMENT-RESPONSE: the settlement receipt of a credited payment. */
export function setReceipt(reply: FastifyReply, p: PaymentRow): FastifyReply {
  const receipt = encodePaymentResponseHeader({ success: true, transaction: p.tx_hash!, network: p.network as `${string}:${string}`, payer: p.payer });
  return reply.header('payment-response', receipt).header('x-payment-response', receipt);
}

/** Sets PAYMENT-RESPONSE (and X-PAYMENT-RESPONSE) to an x402 batch-settlement receipt: the charge and the channel's state. */
export function setChannelReceipt(reply: FastifyReply, receipt: SettleResponse): FastifyReply {
  const encoded = encodePaymentResponseHeader(receipt);
  return reply.header('payment-response', encoded).header('x-payment-response', encoded);
}

/** What payments/settle-matched.ts needs, taken from the running gateway (top-ups are on: services.topup is set). */
export function settleDepsOf(services: Services, log: FastifyBaseLogger): SettleMatchedDeps {
  return {
    db: services.storage.db,
    topup: services.topup!,
    logger: log,
    settleWaitMs: services.config.topup.settleWaitSeconds * 1000,
    countOutcome: (kind) => services.metrics.topups.inc({ outcome: kind }),
  };
}

/**
 * The facilitator or the chain did not answer, or the relayer's transaction was refused (its nonce,
 * fees or gas money): nothing was settled, and the same payment, sent again, settles. Never a
 * rejection: the payer's signature is fine and signing a new payment would not help.
 */
export function facilitatorUnavailable(reason: string): ApiError {
  return new ApiError(
    503,
    'FACILITATOR_UNAVAILABLE',
    `${reason}; nothing was settled or credited. Send the same payment again in a few seconds (do not sign a new one)`,
    {},
    { 'retry-after': String(OUTAGE_RETRY_AFTER_SECONDS) },
  );
}
