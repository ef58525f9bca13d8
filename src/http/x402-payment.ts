import { encodePaymentRequiredHeader, encodePaymentResponseHeader } from '@x402/core/http';
import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import type { Services } from '../services.ts';
import { ApiError } from './errors.ts';
import { OUTAGE_RETRY_AFTER_SECONDS } from '../outage.ts';
import { invalidPayment } from '../payments/decode.ts';
import type { MatchedPayment } from '../payments/match.ts';
import { paymentRequired, TOPUP_DESCRIPTION, type Offer } from '../payments/offers.ts';
import type { PaymentRow } from '../payments/payment-store.ts';
import type { TopupOutcome } from '../payments/settle-payment.ts';

/**
 * The x402 side of HTTP shared by every paid endpoint (top-ups, pay-per-request chat): where the
 * payment comes from, how a 402 offer and a receipt are written, and one settle path, so both
 * endpoints take and credit payments in exactly the same way.
 */

/** The payment header, x402 v2 (`PAYMENT-SIGNATURE`) or v1 (`X-Payment`); undefined when none was sent. */
export function paymentHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers['payment-signature'] ?? headers['x-payment'];
  if (Array.isArray(value)) throw invalidPayment('send exactly one payment header');
  return value;
}

/** 402 with the offers in the body and in PAYMENT-REQUIRED (what @x402/fetch reads first). */
export function askForPayment(
  reply: FastifyReply,
  p: { resource: string; offers: Offer[]; code: string; message: string; description?: string },
  extra: Record<string, unknown> = {},
) {
  const required = paymentRequired(p.resource, p.offers, p.code, p.description ?? TOPUP_DESCRIPTION);
  return reply
    .code(402)
    .header('payment-required', encodePaymentRequiredHeader(required))
    .send({ ...required, message: p.message, ...extra });
}

/** Sets PAYMENT-RESPONSE and its v1 name X-PAYMENT-RESPONSE: the settlement receipt of a credited payment. */
export function setReceipt(reply: FastifyReply, p: PaymentRow): FastifyReply {
  const receipt = encodePaymentResponseHeader({ success: true, transaction: p.tx_hash!, network: p.network as `${string}:${string}`, payer: p.payer });
  return reply.header('payment-response', receipt).header('x-payment-response', receipt);
}

/**
 * Admits the payer (contract wallets only on their chain), then records, verifies, settles and
 * credits the payment exactly once (src/payments/settle-payment.ts). Callers branch on the outcome.
 * `admitVerified` runs between verify and send (a throw refuses with nothing sent).
 */
export async function settleMatched(services: Services, log: FastifyBaseLogger, matched: MatchedPayment, admitVerified?: () => Promise<void>): Promise<TopupOutcome> {
  const topup = services.topup!;
  // The settle path (x402's EVM scheme, viem) is loaded by the first payment, not at start-up.
  const { settleTopup } = await import('../payments/settle-payment.ts');
  await topup.admitPayer(matched);
  const outcome = await settleTopup(
    {
      db: services.storage.db,
      facilitator: topup.facilitator,
      client: topup.clientFor(matched.identity.network)!,
      logger: log,
      settleWaitMs: services.config.topup.settleWaitSeconds * 1000,
      now: Date.now,
      beforeBroadcast: topup.beforeBroadcast,
      admitVerified,
    },
    matched,
  );
  services.metrics.topups.inc({ outcome: outcome.kind });
  return outcome;
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
