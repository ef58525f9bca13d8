import { createHash } from 'node:crypto';
import { PAYMENT_IDENTIFIER, isValidPaymentId } from '@x402/extensions/payment-identifier';

/**
 * x402's `payment-identifier` extension on pay-per-request: the client puts an id (16–128 letters,
 * digits, `-`, `_`) in its payment's `extensions`, and keeps it when it retries after a dropped
 * connection, with a new payment or the same one. The gateway keeps, per payer and id, the body and
 * the payment the id was first sent with, and whether that request ran. A retry is never paid or
 * run twice: its payment is not settled and it is answered 409 naming the first request (the
 * answer itself is not stored). Concurrent retries: one claim wins the insert, one run wins the
 * claimed → ran update (identifier-store.ts).
 */
export { PAYMENT_IDENTIFIER };

export type IdentifierRead = { kind: 'none' } | { kind: 'id'; id: string } | { kind: 'invalid'; problem: string };

/** The identifier a v2 payment payload carries; `invalid` when it has one that breaks the format. */
export function readPaymentIdentifier(envelope: { x402Version: number; extensions?: Record<string, unknown> }): IdentifierRead {
  const ext = envelope.extensions?.[PAYMENT_IDENTIFIER] as { info?: { id?: unknown } } | undefined;
  const id = ext?.info?.id;
  if (id === undefined) return { kind: 'none' };
  if (typeof id !== 'string' || !isValidPaymentId(id)) {
    return { kind: 'invalid', problem: 'extensions["payment-identifier"].info.id must be 16 to 128 letters, digits, "-" or "_"' };
  }
  return { kind: 'id', id };
}

export const bodyDigest = (body: unknown) =>
  createHash('sha256')
    .update(JSON.stringify(body) ?? '')
    .digest('hex');
