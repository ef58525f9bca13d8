import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import type { MatchedPayment } from '../match.ts';
import { bodyDigest, readPaymentIdentifier } from '../pay-per-request/payment-identifier.ts';
import { claimPaymentIdentifier, releasePaymentIdentifier, startIdentifiedRun, type ClaimVerdict, type FirstUse } from '../pay-per-request/identifier-store.ts';
import { uptoHoldWallet } from '../upto/upto-store.ts';
import type { PaidRequestDeps } from './deps.ts';
import { PaidRefusal } from './outcome.ts';

/**
 * A paid request's claim on its payment identifier. Taken only once the payer is known to have
 * signed the payment (settleMatched's `admitSigned`, before anything is recorded), so a forged
 * payment naming someone else claims nothing. Kept while the payment is pending or once the
 * request runs; `finish` frees it on every other path.
 */
export interface IdentifierHold {
  /** Claims the identifier; throws the retry's conflict (its payment is then never recorded or sent). */
  claim(): Promise<void>;
  /** The payment was sent and its outcome is not known yet: the claim stays for the retry of the same payment. */
  keepPending(): void;
  /** The request is about to run (its payment credited); throws the conflict when a concurrent retry already ran it. */
  start(): Promise<void>;
  /** The run was refused before it reserved anything: nothing ran, so `finish` frees the claim. */
  notRun(): void;
  /** In a finally: frees the claim unless the payment is pending or the request ran. */
  finish(): Promise<void>;
}

/**
 * Reads the payment's `payment-identifier`, if it has one, before anything is settled (an invalid
 * one is refused as invalid, src/payments/pay-per-request/payment-identifier.ts), and returns its claim, not yet
 * taken: a retry of a request that ran, or that is being paid for, or the identifier reused for
 * another body, is a conflict (the 409) once claimed, and a payment refused that way is never sent. One identifier
 * is one request whatever the scheme: exact and upto payments of a payer claim the same
 * (payer, id), so a retry that signs a new upto authorization, or switches between exact and upto,
 * is told about the first request as well. Undefined when the payment carries no identifier (x402
 * v1 payments cannot).
 */
export function paymentIdentifierHold(deps: PaidRequestDeps, envelope: object, matched: MatchedPayment): IdentifierHold | undefined {
  const read = readPaymentIdentifier(envelope as { x402Version: number; extensions?: Record<string, unknown> });
  if (read.kind === 'none') return undefined;
  if (read.kind === 'invalid') {
    const message = `${read.problem}; nothing was settled. Use an id such as the one generatePaymentId() from @x402/extensions makes`;
    throw new PaidRefusal({ kind: 'invalid', message });
  }
  const { db } = deps;
  const key = { payer: matched.identity.payer.toLowerCase(), id: read.id, paymentDigest: matched.digest, holder: deps.requestId };
  const claimIt = () => claimPaymentIdentifier(db, { ...key, bodyDigest: bodyDigest(deps.body), now: deps.now() });
  const upto = matched.requirements.scheme === 'upto';
  // A replay of the first request's own upto payment (the same header) is charged under that
  // request: what the 409 says of "this payment" must be that, not the text of another authorization.
  const uptoRetry = (verdict: Extract<ClaimVerdict, { kind: 'conflict' }>, other: RetryPayment): RetryPayment =>
    verdict.first.paymentDigest === key.paymentDigest ? 'upto-same' : other;
  let claimed = false;
  let kept = false;
  return {
    async claim() {
      const verdict = await claimIt();
      if (verdict.kind === 'conflict') throw await conflict(db, key, verdict, upto ? uptoRetry(verdict, 'upto-refused') : 'not-settled');
      claimed = true;
    },
    keepPending: () => void (kept = true),
    async start() {
      for (;;) {
        if (await startIdentifiedRun(db, key)) {
          claimed = kept = true;
          return;
        }
        // Run by a concurrent retry (the conflict), or freed meanwhile by a request with the same
        // payment that had taken the claim over and was then refused: claim it again, and start.
        const verdict = await claimIt();
        if (verdict.kind === 'conflict') throw await conflict(db, key, verdict, upto ? uptoRetry(verdict, 'upto-released') : 'credited');
        claimed = true;
      }
    },
    notRun: () => void (kept = false),
    async finish() {
      if (claimed && !kept) await releasePaymentIdentifier(db, key);
    },
  };
}

/** What became of the retry's own payment when it is refused. */
type RetryPayment = 'not-settled' | 'credited' | 'upto-refused' | 'upto-released' | 'upto-same';

const RETRY_PAYMENT: Record<RetryPayment, (payer: string) => string> = {
  'not-settled': () => 'this payment was not settled and the request did not run',
  // A conflict found as the request starts: its payment is credited, in the balance already.
  credited: (payer) => `this payment is credited to ${payer}'s balance (nothing more was credited) and the request did not run`,
  'upto-refused': () => 'this upto payment was not recorded, nothing will be taken under it, and the request did not run',
  'upto-released': () => 'this upto payment charges nothing (0 is settled under it) and the request did not run',
  'upto-same': () => "this is the first request's own upto payment, charged once for that request's charge, and the request did not run",
};

/** The conflict of a retry (the 409): what became of the first request under the identifier, and what to do. */
async function conflict(
  db: Kysely<Database>,
  key: { payer: string; id: string },
  verdict: Extract<ClaimVerdict, { kind: 'conflict' }>,
  retry: RetryPayment,
): Promise<PaidRefusal> {
  const first = await describeFirst(db, key.payer, verdict.first);
  const id = `payment identifier "${key.id}"`;
  const notSettled = RETRY_PAYMENT[retry](key.payer);
  const refused = (message: string, retryLater = false) => new PaidRefusal({ kind: 'identifier-conflict', message, fields: first.fields, retryLater });
  switch (verdict.reason) {
    case 'other-body':
      return refused(
        `${id} was first used ${first.when} for another request body; ${notSettled}. A retry sends the same body; a new request takes a new identifier`,
      );
    case 'in-progress':
      return refused(
        `the request first sent ${first.when} with ${id} is being paid for with another payment; ${notSettled}. Send that first payment again, or retry in a few seconds to learn what it was charged`,
        true,
      );
    case 'ran':
      return refused(
        `the request first sent ${first.when} with ${id} was paid for and ran (${first.charge}); ${notSettled} again. Its answer is not kept: ` +
          (first.upto
            ? 'its upto payment settles that charge and nothing more'
            : `GET /v1/usage/${key.payer} lists the charge, and what it did not use is in the balance`) +
          '. A new request takes a new identifier',
      );
  }
}

/**
 * The first request under the identifier: its request id and charge (its usage row: under the
 * payer's wallet for exact, under the payer's upto hold wallet for upto) and, for an upto payment,
 * where its settle stands.
 */
async function describeFirst(db: Kysely<Database>, payer: string, first: FirstUse) {
  const when = `at ${new Date(first.createdAt).toISOString()}`;
  const payment = await db
    .selectFrom('payments')
    .select(['id', 'upto_state'])
    .where('payer', '=', payer)
    .where('payload_digest', '=', first.paymentDigest)
    .executeTakeFirst();
  const upto = payment?.upto_state != null;
  const uptoFields = upto ? { first_payment: payment.id, first_upto_state: payment.upto_state } : {};
  if (first.requestId === null) return { when, upto, charge: 'not run yet', fields: { first_request_id: null, ...uptoFields } };
  const usage = await db
    .selectFrom('request_usage')
    .select(['charged_usdc', 'status'])
    .where('wallet', 'in', [payer, uptoHoldWallet(payer)])
    .where('request_id', '=', first.requestId)
    .executeTakeFirst();
  const settle = upto ? `; upto payment ${payment.id} is ${payment.upto_state}` : '';
  const billed = usage ? `charged ${Number(usage.charged_usdc)} micro-USDC` : 'still running or not billed yet';
  const charge = `request ${first.requestId}, ${billed}${settle}`;
  return { when, upto, charge, fields: { first_request_id: first.requestId, first_charged_usdc: usage ? Number(usage.charged_usdc) : null, ...uptoFields } };
}
