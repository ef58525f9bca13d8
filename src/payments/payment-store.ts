import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { getBalance } from '../ledger/balances.ts';
import { applyMovement } from '../ledger/movements.ts';
import { isUniqueViolation } from '../storage/constraint-errors.ts';
import type { Database, PaymentState } from '../storage/schema.ts';
import type { MatchedPayment, PaymentIdentity } from './match.ts';
import { microUsdcFor, sameTerms, termsDigest } from './payment-terms.ts';
import { INITIAL_STATE } from '../ledger/payment-states.ts';
import { stateColumns, transition } from './states.ts';

import type { PaymentRow } from './payment-row.ts';

export type { PaymentRow };

/** The ledger reference of a payment's credit: one credit per payment, by the unique index. */
export const ledgerReference = (paymentId: string) => `payment:${paymentId}`;

/** The refusal reason of a chat request that carried a payment a top-up recorded first. */
export const TOPUP_PAYMENT = 'topup_payment';

export type OpenResult =
  /** This request owns the attempt: verify and settle it. */
  | { kind: 'claimed'; row: PaymentRow }
  /** This very payment is recorded already; `row` says how far it got. */
  | { kind: 'existing'; row: PaymentRow }
  /** Another payment (other terms or signature) holds this authorization nonce: `row`, never changed. */
  | { kind: 'conflict'; row: PaymentRow }
  /** A chat request found a payment recorded for a top-up: it must not join, reclaim or settle it. */
  | { kind: 'topup_payment'; row: PaymentRow };

/**
 * Records the payment before anything is sent, or finds the record of the same authorization.
 * Callers check first that the payer signed `m` (signature-check.ts): a row is only ever created by
 * a payload its payer signed, never by a tampered copy of someone's header.
 * A row's terms are written once, here, and never change: a different payload under the same
 * (network, asset, payer, nonce) is a conflict whatever the row's status. A failed attempt can be
 * claimed again with exactly the same payment (the payer may have added funds or approved Permit2
 * since), by one request at a time.
 */
export async function openPayment(db: Kysely<Database>, m: MatchedPayment, fromBlock: number, now: number): Promise<OpenResult> {
  const id = randomUUID();
  const i = m.identity;
  const digest = termsDigest(m);
  const decimals = m.offer.config.decimals;
  try {
    await db
      .insertInto('payments')
      .values({
        id,
        network: i.network,
        asset: i.asset,
        payer: i.payer,
        nonce: i.nonce,
        transfer_method: i.method,
        pay_to: i.payTo,
        amount_atomic: i.amountAtomic,
        amount_usdc: microUsdcFor(BigInt(i.amountAtomic), decimals),
        payload_digest: m.digest,
        terms_digest: digest,
        token_decimals: decimals,
        onchain_amount_atomic: null,
        valid_before: i.validBefore,
        from_block: fromBlock,
        ...stateColumns(INITIAL_STATE),
        tx_hash: null,
        failure_reason: null,
        balance_after_usdc: null,
        locked_after_usdc: null,
        created_at: now,
        updated_at: now,
        credited_at: null,
        purpose: m.purpose ?? 'topup',
        request_digest: m.requestDigest ?? null,
      })
      .execute();
    return { kind: 'claimed', row: await findPayment(db, id) };
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
  }
  const existing = await byAuthorization(db, i).executeTakeFirstOrThrow();
  if (!sameTerms(existing, m, digest)) return { kind: 'conflict', row: existing };
  // A chat request never joins, reclaims or settles a top-up's payment: it would wait on the
  // top-up and then run, or settle a failed top-up from a leaked header.
  if (m.purpose === 'chat' && existing.purpose !== 'chat') return { kind: 'topup_payment', row: existing };
  if (existing.state === 'failed' || existing.state === 'released') {
    // Only the state moves: the terms stay those recorded first (they are equal anyway).
    const reopened = await reclaimFailed(db, existing.id, now);
    if (reopened) return { kind: 'claimed', row: reopened };
  }
  return { kind: 'existing', row: await findPayment(db, existing.id) };
}

/**
 * Claims a failed payment again for the same money (amount, payTo, deadline, method) under another
 * valid signature (settle-topup.ts, settleConflict): only the status moves, the terms stay those
 * recorded first. Null when another request claimed it first.
 */
export async function reclaimFailed(db: Kysely<Database>, id: string, now: number): Promise<PaymentRow | null> {
  const reopened = await transition(db, id, ['failed', 'released'], 'pending', { set: { failure_reason: null, updated_at: now } });
  return reopened === 'moved' ? findPayment(db, id) : null;
}

export function findPayment(db: Kysely<Database>, id: string): Promise<PaymentRow> {
  return db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

/**
 * The payment recorded under this authorization (network, asset, payer, nonce), the row openPayment
 * would find, when it is one openPayment would not claim again (only a failed or released attempt
 * is): a request carrying it is refused whatever else it is. Undefined otherwise.
 */
export function recordedForGood(db: Kysely<Database>, i: Pick<PaymentIdentity, 'network' | 'asset' | 'payer' | 'nonce'>): Promise<PaymentRow | undefined> {
  return byAuthorization(db, i).where('state', 'not in', ['failed', 'released']).executeTakeFirst();
}

/** The payment recorded under one authorization: (network, asset, payer, nonce) is unique. */
function byAuthorization(db: Kysely<Database>, i: Pick<PaymentIdentity, 'network' | 'asset' | 'payer' | 'nonce'>) {
  return db
    .selectFrom('payments')
    .selectAll()
    .where('network', '=', i.network)
    .where('asset', '=', i.asset)
    .where('payer', '=', i.payer)
    .where('nonce', '=', i.nonce);
}

/**
 * Records the transaction that settles the payment: it is on its way. Also from `failed` and
 * `released`: a row released as never sent (see releaseUnsent) whose slow request did send after
 * all must be watched again. False when another payment already owns that transaction (the unique
 * (network, tx_hash) index): the x402 facilitator answers a settle of a signature it is already
 * settling with that settlement's hash, which is not this payment's.
 */
export async function markSubmitted(db: Kysely<Database>, id: string, txHash: string, now = Date.now()): Promise<boolean> {
  try {
    const set = { tx_hash: txHash.toLowerCase(), failure_reason: null, updated_at: now };
    await transition(db, id, ['pending', 'submitted', 'failed', 'released'], 'submitted', { set });
    return true;
  } catch (err) {
    if (isUniqueViolation(err)) return false;
    throw err;
  }
}

export async function markFailed(db: Kysely<Database>, id: string, reason: string, now = Date.now()): Promise<void> {
  await transition(db, id, ['pending', 'submitted'], 'failed', { set: { failure_reason: reason.slice(0, 200), updated_at: now } });
}

/**
 * The facilitator or the chain could not be reached while this request verified or settled the
 * payment: nothing was settled, and the same payment sent again may claim it.
 */
export async function releaseUnavailable(db: Kysely<Database>, id: string, reason: string, now = Date.now()): Promise<void> {
  await transition(db, id, ['pending', 'submitted'], 'released', { release: 'unavailable', set: { failure_reason: reason, updated_at: now } });
}

/**
 * Releases a payment recorded but never sent (its process died between record and broadcast), so
 * that a retry of the same payment can claim it again. Only if nobody touched the row since it was
 * read as stale, and it holds no transaction of this attempt: a pending row's hash, if any, is an
 * earlier attempt's (a settlement that reverted, kept when the payment was reopened), since sending
 * moves the row to `submitted`. That hash stays: the reconciler watches the released row by it.
 */
export const RELEASED_UNSENT = 'recorded but never sent (the gateway stopped before sending it); send the same payment again';

export async function releaseUnsent(db: Kysely<Database>, row: PaymentRow, now = Date.now()): Promise<boolean> {
  const released = await transition(db, row.id, 'pending', 'released', {
    release: 'never_sent',
    set: { failure_reason: RELEASED_UNSENT, updated_at: now },
    unchangedSince: { updatedAt: Number(row.updated_at), txHash: row.tx_hash },
  });
  return released === 'moved';
}

/**
 * Releases a payment whose settlement was sent but dropped by the node before it was mined (the
 * authorization is still unused on chain), so that a retry of the same payment sends it again.
 * Only if nobody touched the row since it was read. The dropped hash is kept: the transaction was
 * broadcast, so other nodes and anyone watching the pool hold its calldata, the whole
 * authorization, and a row that held a hash stays watched (paymentsWatchedAfterLetGo) even once a
 * retry of it fails before sending. Should it come back and be mined after all, it credits the
 * payment once (inspectOnChain), and a retry's own transaction then reverts.
 */
export const RELEASED_DROPPED = 'the settlement was sent but dropped by the chain before it was mined; send the same payment again';

export async function releaseDropped(db: Kysely<Database>, row: PaymentRow, now = Date.now()): Promise<boolean> {
  if (row.tx_hash === null) return false;
  const released = await transition(db, row.id, 'submitted', 'released', {
    release: 'dropped',
    set: { failure_reason: RELEASED_DROPPED, updated_at: now },
    unchangedSince: { updatedAt: Number(row.updated_at), txHash: row.tx_hash },
  });
  return released === 'moved';
}

/**
 * The node refused the relayer's settlement (relayer-send.ts): the hash recorded just before the
 * send names a transaction that was never sent, so the row gets back the hash it held when this
 * request claimed it (none, or for a reopened payment the earlier attempt's that reverted, whose
 * public calldata the reconciler keeps watching), and the payment is let go like any other the
 * facilitator could not settle. Only if the row still holds the attempt this request made
 * (`sentHash`, or when no hash was recorded yet, the row as the request claimed it): a replay may
 * have taken the payment over meanwhile, and its live attempt must stay.
 */
export async function releaseRefused(db: Kysely<Database>, claimed: PaymentRow, sentHash: string | null, now = Date.now()): Promise<boolean> {
  const set = { failure_reason: UNAVAILABLE_DURING_SETTLE, tx_hash: claimed.tx_hash, updated_at: now };
  const unchangedSince = sentHash === null ? { txHash: claimed.tx_hash, updatedAt: Number(claimed.updated_at) } : { txHash: sentHash.toLowerCase() };
  const released = await transition(db, claimed.id, ['pending', 'submitted'], 'released', { release: 'refused_by_node', set, unchangedSince });
  return released === 'moved';
}

/** Failed because the facilitator, the chain or the relayer's send failed: nothing was settled. */
export const UNAVAILABLE_DURING_VERIFY = 'facilitator unavailable during verify';
export const UNAVAILABLE_DURING_SETTLE = 'facilitator unavailable during settle';

/**
 * A payment the gateway let go of with nothing settled, for a reason of its own (never the
 * payer's): the same payment, sent again, may claim it, and a request waiting on it must not pass
 * the reason on as a rejection.
 */
export const isReleased = (row: PaymentRow) => row.state === 'released';

/** True when some other payment already owns `txHash`. */
export async function isClaimedByOther(db: Kysely<Database>, id: string, network: string, txHash: string): Promise<boolean> {
  const row = await db
    .selectFrom('payments')
    .select('id')
    .where('network', '=', network)
    .where('tx_hash', '=', txHash.toLowerCase())
    .where('id', '!=', id)
    .executeTakeFirst();
  return row !== undefined;
}

/** The states an exact payment can be credited from (an upto payment is never credited here: it is past them). */
const UNCREDITED = ['pending', 'submitted', 'failed', 'released'] as const;

/**
 * Credits the payment with what the chain says reached payTo for its authorization
 * (`onchainAtomic`, from the settling transaction's Transfer log), exactly once: the status update
 * only succeeds for a payment not yet credited, and the ledger's unique (kind, reference) index
 * refuses a second credit even if two instances race. If the chain's amount is not the amount the
 * payment recorded, nothing is credited and the row says why. Returns the row as it now stands.
 */
export async function creditPayment(db: Kysely<Database>, id: string, txHash: string, onchainAtomic: bigint, now = Date.now()): Promise<PaymentRow> {
  const tx = txHash.toLowerCase();
  try {
    await db.transaction().execute(async (trx) => {
      const p = await trx.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      if (!(UNCREDITED as readonly PaymentState[]).includes(p.state)) return;
      if (p.token_decimals === null || onchainAtomic !== BigInt(p.amount_atomic)) {
        const reason = `the chain shows ${onchainAtomic} token units reached payTo for this authorization in ${tx}, not the ${p.amount_atomic} this payment recorded; nothing was credited`;
        await transition(trx, id, UNCREDITED, 'failed', { set: { failure_reason: reason, onchain_amount_atomic: onchainAtomic.toString(), updated_at: now } });
        return;
      }
      const set = { tx_hash: tx, onchain_amount_atomic: onchainAtomic.toString(), failure_reason: null, credited_at: now, updated_at: now };
      if ((await transition(trx, id, UNCREDITED, 'credited', { set })) === 'lost-race') return; // credited meanwhile: nothing to do
      const amountUsdc = microUsdcFor(onchainAtomic, p.token_decimals);
      await applyMovement(trx, { wallet: p.payer, kind: 'topup', amountUsdc, reference: ledgerReference(id), note: `x402 ${p.network} ${tx}` }, now);
      const balance = await getBalance(trx, p.payer);
      await trx
        .updateTable('payments')
        .set({ balance_after_usdc: balance.balance_usdc, locked_after_usdc: balance.locked_usdc })
        .where('id', '=', id)
        .execute();
    });
  } catch (err) {
    // Another instance credited it between our check and our insert, or another payment owns this
    // transaction: that credit stands.
    if (!isUniqueViolation(err)) throw err;
  }
  return findPayment(db, id);
}

/**
 * Payments given up with nothing settled whose authorization can still be used, until valid_before
 * (plus a margin for a block mined right at it):
 * - released by the gateway (isReleased): the transaction that was dropped, refused or never
 *   answered may still be mined by some node that kept it. The payer was told 202 "do not pay
 *   again" and may never retry;
 * - failed after our transaction was sent (tx_hash) with the authorization unused (no on-chain
 *   amount): a settlement that reverted (the payer moved its funds while it waited to be mined).
 *   Its calldata holds the whole authorization, so anyone may put it on chain again once the payer
 *   holds the money, and the money then reaches payTo. A payment that failed before anything was
 *   sent is not watched: its authorization never left the gateway.
 * The reconciler keeps reading the chain for these and credits what arrived.
 *
 * Watched for RELEASED_WATCH_MS after the release or failure at most, newest first, up to `limit`:
 * a payer may sign a validBefore years away, and a list ordered oldest first that nothing moves
 * along would be filled for good by 100 such rows, and a later one never looked at again.
 * After the window the payer's own retry of the same payment still
 * credits it, and `ledger-check --chain` names any such payment that was paid but never credited.
 */
export function paymentsWatchedAfterLetGo(db: Kysely<Database>, nowSeconds: number, limit = 500): Promise<PaymentRow[]> {
  return db
    .selectFrom('payments')
    .selectAll()
    .where((eb) =>
      eb.or([eb('state', '=', 'released'), eb.and([eb('state', '=', 'failed'), eb('tx_hash', 'is not', null), eb('onchain_amount_atomic', 'is', null)])]),
    )
    .where('valid_before', '>=', nowSeconds - RELEASED_WATCH_MARGIN_SECONDS)
    .where('updated_at', '>=', nowSeconds * 1000 - RELEASED_WATCH_MS)
    .orderBy('updated_at', 'desc')
    .limit(limit)
    .execute();
}

/** How long after its release (or failure after a send) a payment's authorization is still looked for on chain: a dropped transaction a node kept comes back within minutes, not days. */
export const RELEASED_WATCH_MS = 60 * 60 * 1000;

/** As inspectOnChain's margin for an authorization expiring: a block mined at valid_before is seen after it. */
export const RELEASED_WATCH_MARGIN_SECONDS = 120;

/** Payments still open (not credited, not failed), oldest first: the reconciler's work list. */
export function openPayments(db: Kysely<Database>, limit = 100): Promise<PaymentRow[]> {
  return db.selectFrom('payments').selectAll().where('state', 'in', ['pending', 'submitted']).orderBy('updated_at').limit(limit).execute();
}
