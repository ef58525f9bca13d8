import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { findPayment, type PaymentRow } from '../payment-store.ts';
import { finishSettling } from './reconcile-upto.ts';
import type { UptoSettleDeps } from './settle-upto.ts';
import { reopenUnsettled, writeOff } from './upto-store.ts';

/**
 * The operator's two ways out of an unsettled upto payment (`tollgate admin upto`), each refused
 * for a payment that is not unsettled: `retry` settles it again for the same amount (the payer
 * approved Permit2 again or added funds; if the chain shows it paid after all, that is recorded
 * and nothing is sent), `writeOffUpto` records the loss with a reason. Either frees the payer.
 */
export type OperatorOutcome = { kind: 'done'; payment: PaymentRow } | { kind: 'refused'; message: string };

async function unsettled(db: Kysely<Database>, id: string): Promise<PaymentRow | string> {
  const p = await db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirst();
  if (!p) return `no payment ${id}`;
  if (p.upto_state !== 'unsettled') return `payment ${id} is ${p.upto_state === null ? 'not an upto payment' : p.upto_state}, not unsettled; nothing was changed`;
  return p;
}

export async function retryUpto(deps: UptoSettleDeps & { now: () => number }, id: string): Promise<OperatorOutcome> {
  const p = await unsettled(deps.db, id);
  if (typeof p === 'string') return { kind: 'refused', message: p };
  if (!(await reopenUnsettled(deps.db, id, deps.now()))) return { kind: 'refused', message: `payment ${id} changed meanwhile; nothing was sent, look at it again` };
  await finishSettling(deps, await findPayment(deps.db, id));
  return { kind: 'done', payment: await findPayment(deps.db, id) };
}

export async function writeOffUpto(db: Kysely<Database>, id: string, reason: string, now = Date.now()): Promise<OperatorOutcome> {
  const p = await unsettled(db, id);
  if (typeof p === 'string') return { kind: 'refused', message: p };
  if (!(await writeOff(db, id, reason, now))) return { kind: 'refused', message: `payment ${id} changed meanwhile; nothing was changed, look at it again` };
  return { kind: 'done', payment: await findPayment(db, id) };
}
