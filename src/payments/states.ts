import type { Kysely, Updateable } from 'kysely';
import { isAllowed, needsUnusedAuthorization, PAYMENT_STATES } from '../ledger/payment-states.ts';
import type { Database, PaymentState, PaymentTable, ReleaseKind } from '../storage/schema.ts';

/*
 * The one guarded transition of a payment's state: every write of `state`, `status`, `upto_state`
 * and `release_kind` goes through here, and only along a move the table in
 * src/ledger/payment-states.ts lists.
 */

/** The state columns of a payment in `state`, as an insert or an update writes them. */
export function stateColumns(state: PaymentState, release: ReleaseKind | null = null) {
  const facts = PAYMENT_STATES[state];
  return { state, status: facts.status, upto_state: facts.upto, release_kind: release };
}

/** Everything else a transition may write with the state. */
export type PaymentFields = Omit<Updateable<PaymentTable>, 'id' | 'state' | 'status' | 'upto_state' | 'release_kind'>;

export interface Change {
  set?: PaymentFields;
  /** Required exactly when moving to `released`: why the gateway let the payment go. */
  release?: ReleaseKind;
  /** Further conditions of a compare-and-set on a row read earlier (a reconciler's stale row). */
  unchangedSince?: { updatedAt?: number; txHash?: string | null };
}

/**
 * Lost-race is an ordinary outcome, not an error: a live request, the reconcilers of several
 * instances and an operator may act on one payment at once, and every caller decides what losing
 * means for it (usually: someone else moved it; read it again).
 */
export type TransitionOutcome = 'moved' | 'lost-race';

export class TransitionRefused extends Error {}

/**
 * Moves payment `id` from one of `from` to `to` with one guarded update (`WHERE id = ? AND state IN
 * from`, plus `onchain_amount_atomic IS NULL` where the rule says so), so that of several racing movers exactly one wins. Throws for a move the table does not
 * list, and if more than one row changed.
 */
export async function transition(
  db: Kysely<Database>,
  id: string,
  from: PaymentState | readonly PaymentState[],
  to: PaymentState,
  change: Change = {},
): Promise<TransitionOutcome> {
  const froms: readonly PaymentState[] = typeof from === 'string' ? [from] : from;
  const refused = froms.filter((f) => !isAllowed(f, to));
  if (froms.length === 0 || refused.length > 0) throw new TransitionRefused(`payment ${id}: no transition ${refused.join('|') || '(none)'} -> ${to}`);
  if ((to === 'released') !== (change.release !== undefined)) {
    throw new TransitionRefused(`payment ${id}: a release kind goes with state released, and only with it`);
  }
  let update = db
    .updateTable('payments')
    .set({ ...change.set, ...stateColumns(to, change.release ?? null) })
    .where('id', '=', id)
    .where('state', 'in', froms);
  if (needsUnusedAuthorization(to)) update = update.where('onchain_amount_atomic', 'is', null);
  const since = change.unchangedSince;
  if (since?.updatedAt !== undefined) update = update.where('updated_at', '=', since.updatedAt);
  if (since && 'txHash' in since) update = update.where('tx_hash', since.txHash === null ? 'is' : '=', since.txHash ?? null);
  const result = await update.executeTakeFirst();
  const changed = Number(result.numUpdatedRows);
  if (changed > 1) throw new Error(`payment ${id}: a transition to ${to} changed ${changed} rows`);
  return changed === 1 ? 'moved' : 'lost-race';
}

/** As `transition`, for a move that nobody else may make meanwhile: losing it is a defect, and throws. */
export async function transitionOrThrow(
  db: Kysely<Database>,
  id: string,
  from: PaymentState | readonly PaymentState[],
  to: PaymentState,
  change: Change = {},
): Promise<void> {
  if ((await transition(db, id, from, to, change)) === 'lost-race') throw new Error(`payment ${id} is no longer ${[from].flat().join(' or ')}`);
}
