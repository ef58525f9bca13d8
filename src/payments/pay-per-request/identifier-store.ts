import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';

/**
 * The `payment_identifiers` table (migration 011): claims on x402 payment identifiers, per payer
 * (payment-identifier.ts says what they are for). Free of x402 code, so the pruning job does not
 * load it when the gateway starts.
 */

/** How long an identifier is remembered: far longer than any client retries a dropped request. */
export const PAYMENT_IDENTIFIER_KEEP_MS = 24 * 3600_000;

export interface IdentifierClaim {
  payer: string;
  id: string;
  bodyDigest: string;
  /** The payment's signature digest (MatchedPayment.digest). */
  paymentDigest: string;
  /** The request claiming it (its request id): only the holder frees a claim. */
  holder: string;
  now: number;
}

/** What the first request under an identifier was, for the 409 of a retry. */
export interface FirstUse {
  requestId: string | null;
  createdAt: number;
  /** The digest of the payment it was first paid with (payments.payload_digest). */
  paymentDigest: string;
}

export type ClaimVerdict = { kind: 'claimed' } | { kind: 'conflict'; reason: 'other-body' | 'ran' | 'in-progress'; first: FirstUse };

type ClaimKey = Pick<IdentifierClaim, 'payer' | 'id' | 'holder'>;

/**
 * Claims `id` for this payer, body and payment, once the payer is known to have signed the payment
 * (never for the payer a header merely names). A first use claims it; a retry is told what became
 * of the first (a conflict) unless it is the same body and payment whose request has not run yet
 * (a payment being settled, sent again as the 503 said): that retry takes the claim over, and the
 * first request, which no longer holds it, cannot free it (releasePaymentIdentifier).
 */
export async function claimPaymentIdentifier(db: Kysely<Database>, c: IdentifierClaim): Promise<ClaimVerdict> {
  for (;;) {
    const inserted = await db
      .insertInto('payment_identifiers')
      .values({ payer: c.payer, id: c.id, body_digest: c.bodyDigest, payment_digest: c.paymentDigest, request_id: null, created_at: c.now, holder: c.holder })
      .onConflict((oc) => oc.columns(['payer', 'id']).doNothing())
      .executeTakeFirst();
    if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 1) return { kind: 'claimed' };
    const row = await db.selectFrom('payment_identifiers').selectAll().where('payer', '=', c.payer).where('id', '=', c.id).executeTakeFirst();
    // Released between the insert and the read (its payment was refused): claim it again.
    if (!row) continue;
    const first = { requestId: row.request_id, createdAt: Number(row.created_at), paymentDigest: row.payment_digest };
    if (row.body_digest !== c.bodyDigest) return { kind: 'conflict', reason: 'other-body', first };
    if (row.request_id !== null) return { kind: 'conflict', reason: 'ran', first };
    if (row.payment_digest !== c.paymentDigest) {
      // The first payment is still being settled: wait for it (the 409). Once it can settle nothing
      // (failed, or released unsent or refused by the node) and its request never ran, the identifier was left claimed with
      // nothing to show for it, and every new payment under it was a 409 until the claim was pruned a
      // day later: the new payment takes it over instead. Should the first one still be credited
      // later (a failed authorization sent again), that money is in the payer's balance, and its run
      // finds the identifier taken (startIdentifiedRun matches the payment).
      if (!(await settledNothing(db, c.payer, row.payment_digest))) return { kind: 'conflict', reason: 'in-progress', first };
      if (await updateUnstarted(db, c, row.payment_digest, { payment_digest: c.paymentDigest, holder: c.holder })) return { kind: 'claimed' };
      continue;
    }
    if (await updateUnstarted(db, c, c.paymentDigest, { holder: c.holder })) return { kind: 'claimed' };
    // Started or released meanwhile: look again.
  }
}

/**
 * Whether the payer's payment with this signature digest is recorded and can settle nothing any more:
 * failed, or released before it was sent (`never_sent`) or refused by the node. A payment released as
 * `dropped` or `unavailable` may still be mined (its transaction may be out there), so it keeps the claim.
 * A failed payment whose settlement reverted can be landed later only by someone sending its public
 * calldata again on purpose; the reconciler watches it and credits that to the payer's balance
 * (paymentsWatchedAfterLetGo), so taking its claim over loses the payer nothing.
 */
async function settledNothing(db: Kysely<Database>, payer: string, paymentDigest: string): Promise<boolean> {
  const payment = await db
    .selectFrom('payments')
    .select(['state', 'release_kind'])
    .where('payload_digest', '=', paymentDigest)
    .where('payer', '=', payer)
    .executeTakeFirst();
  if (payment?.state === 'failed') return true;
  return payment?.state === 'released' && (payment.release_kind === 'never_sent' || payment.release_kind === 'refused_by_node');
}

/**
 * The request starts running: true for the one run that may go ahead (it becomes the holder),
 * false when another already ran. Any request with the claimed payment may start it, whether or
 * not it still holds the claim: the payment is credited, and one run is what it pays for.
 */
export async function startIdentifiedRun(db: Kysely<Database>, c: Pick<IdentifierClaim, 'payer' | 'id' | 'paymentDigest' | 'holder'>): Promise<boolean> {
  return updateUnstarted(db, c, c.paymentDigest, { request_id: c.holder, holder: c.holder });
}

/**
 * Writes `set` on the claim of (payer, id) if it is still held under `paymentDigest` and its request
 * has not started: the compare-and-set every move of a claim goes through. True when it moved.
 */
async function updateUnstarted(
  db: Kysely<Database>,
  key: Pick<IdentifierClaim, 'payer' | 'id'>,
  paymentDigest: string,
  set: { payment_digest?: string; holder: string; request_id?: string },
): Promise<boolean> {
  const updated = await db
    .updateTable('payment_identifiers')
    .set(set)
    .where('payer', '=', key.payer)
    .where('id', '=', key.id)
    .where('payment_digest', '=', paymentDigest)
    .where('request_id', 'is', null)
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) === 1;
}

/**
 * Frees the identifier claimed by `holder`, when its request did not run (its payment refused or
 * not settled, the request refused, or its run refused before it reserved anything): the client
 * may pay again under it. Compare-and-delete: a claim another request took over or started is not
 * this request's to free.
 */
export async function releasePaymentIdentifier(db: Kysely<Database>, c: ClaimKey): Promise<void> {
  await db.deleteFrom('payment_identifiers').where('payer', '=', c.payer).where('id', '=', c.id).where('holder', '=', c.holder).execute();
}

export async function prunePaymentIdentifiers(db: Kysely<Database>, now = Date.now()): Promise<number> {
  const result = await db
    .deleteFrom('payment_identifiers')
    .where('created_at', '<', now - PAYMENT_IDENTIFIER_KEEP_MS)
    .executeTakeFirst();
  return Number(result.numDeletedRows ?? 0);
}
