import type { FastifyRequest } from 'fastify';
import type { MatchedPayment } from '../payments/match.ts';
import { bodyDigest, readPaymentIdentifier } from '../payments/pay-per-request/payment-identifier.ts';
import { claimPaymentIdentifier, releasePaymentIdentifier, startIdentifiedRun, type ClaimVerdict, type FirstUse } from '../payments/pay-per-request/identifier-store.ts';
import { ApiError, badRequest } from '../refusal.ts';
import type { Services } from '../services.ts';

/** A paid request's claim on its payment identifier, held from before the settle until it runs. */
export interface IdentifierHold {
  /** The payment was refused or could not be settled: the identifier is free again. */
  release(): Promise<void>;
  /** The request is about to run; throws the 409 when a concurrent retry already ran it. */
  start(requestId: string): Promise<void>;
}

/**
 * Claims the payment's `payment-identifier`, if it has one, before anything is settled
 * (src/payments/pay-per-request/payment-identifier.ts): a retry of a request that ran, or that is
 * being paid for, or the identifier reused for another body, is a 409 and its payment is never
 * settled. Undefined when the payment carries no identifier (x402 v1 payments cannot).
 */
export async function holdPaymentIdentifier(services: Services, request: FastifyRequest, envelope: object, matched: MatchedPayment): Promise<IdentifierHold | undefined> {
  const read = readPaymentIdentifier(envelope as { x402Version: number; extensions?: Record<string, unknown> });
  if (read.kind === 'none') return undefined;
  if (read.kind === 'invalid') throw badRequest(`${read.problem}; nothing was settled. Use an id such as the one generatePaymentId() from @x402/extensions makes`);
  const db = services.storage.db;
  const key = { payer: matched.identity.payer.toLowerCase(), id: read.id, paymentDigest: matched.digest };
  const verdict = await claimPaymentIdentifier(db, { ...key, bodyDigest: bodyDigest(request.body), now: services.now() });
  if (verdict.kind === 'conflict') throw await conflict(services, key, verdict);
  return {
    release: () => releasePaymentIdentifier(db, key),
    async start(requestId) {
      if (await startIdentifiedRun(db, key, requestId)) return;
      const row = await db.selectFrom('payment_identifiers').select(['request_id', 'created_at']).where('payer', '=', key.payer).where('id', '=', key.id).executeTakeFirst();
      throw await conflict(services, key, { kind: 'conflict', reason: 'ran', first: { requestId: row?.request_id ?? null, createdAt: Number(row?.created_at ?? 0) } });
    },
  };
}

/** The 409 of a retry: what became of the first request under the identifier, and what to do. */
async function conflict(services: Services, key: { payer: string; id: string }, verdict: Extract<ClaimVerdict, { kind: 'conflict' }>): Promise<ApiError> {
  const first = await describeFirst(services, key.payer, verdict.first);
  const id = `payment identifier "${key.id}"`;
  const notSettled = 'this payment was not settled and the request did not run';
  switch (verdict.reason) {
    case 'other-body':
      return new ApiError(409, 'PAYMENT_IDENTIFIER_CONFLICT', `${id} was first used ${first.when} for another request body; ${notSettled}. A retry sends the same body; a new request takes a new identifier`, first.fields);
    case 'in-progress':
      return new ApiError(
        409,
        'PAYMENT_IDENTIFIER_CONFLICT',
        `the request first sent ${first.when} with ${id} is being paid for with another payment; ${notSettled}. Send that first payment again, or retry in a few seconds to learn what it was charged`,
        first.fields,
        { 'retry-after': '5' },
      );
    case 'ran':
      return new ApiError(
        409,
        'PAYMENT_IDENTIFIER_CONFLICT',
        `the request first sent ${first.when} with ${id} was paid for and ran (${first.charge}); ${notSettled} again. Its answer is not kept: GET /v1/usage/${key.payer} lists the charge, and what it did not use is in the balance. A new request takes a new identifier`,
        first.fields,
      );
  }
}

async function describeFirst(services: Services, payer: string, first: FirstUse) {
  const when = `at ${new Date(first.createdAt).toISOString()}`;
  if (first.requestId === null) return { when, charge: 'not run yet', fields: { first_request_id: null } };
  const usage = await services.storage.db
    .selectFrom('request_usage')
    .select(['charged_usdc', 'status'])
    .where('wallet', '=', payer)
    .where('request_id', '=', first.requestId)
    .executeTakeFirst();
  const charge = usage ? `request ${first.requestId}, charged ${Number(usage.charged_usdc)} micro-USDC` : `request ${first.requestId}, still running or not billed yet`;
  return { when, charge, fields: { first_request_id: first.requestId, first_charged_usdc: usage ? Number(usage.charged_usdc) : null } };
}
