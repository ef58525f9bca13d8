import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { inspectOnChain } from '../onchain.ts';
import { findPayment, isClaimedByOther, type PaymentRow } from '../payment-store.ts';
import { finishSettling } from './reconcile-upto.ts';
import type { UptoSettleDeps } from './settle-upto.ts';
import { reopenUnsettled, settleWrittenOff, writeOff } from './upto-store.ts';

/**
 * The operator's two ways out of an unsettled upto payment (`tollgate admin upto`): `retry` settles
 * it again for the same amount (the payer approved Permit2 again or added funds; if the chain shows
 * it paid after all, that is recorded and nothing is sent), `writeOffUpto` records the loss with a
 * reason. Either frees the payer. `retry` also takes a written-off payment whose money landed
 * after all (ledger-check --chain names it): the chain is read, and it is closed as settled.
 */
export type OperatorOutcome = { kind: 'done'; payment: PaymentRow } | { kind: 'refused'; message: string };

type RetryDeps = UptoSettleDeps & { now: () => number };

async function uptoPayment(db: Kysely<Database>, id: string, states: string[]): Promise<PaymentRow | string> {
  const p = await db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirst();
  if (!p) return `no payment ${id}`;
  if (p.upto_state === null || !states.includes(p.upto_state))
    return `payment ${id} is ${p.upto_state === null ? 'not an upto payment' : p.upto_state}, not ${states[0]}; nothing was changed`;
  return p;
}

export async function retryUpto(deps: RetryDeps, id: string): Promise<OperatorOutcome> {
  const p = await uptoPayment(deps.db, id, ['unsettled', 'written_off']);
  if (typeof p === 'string') return { kind: 'refused', message: p };
  if (p.upto_state === 'written_off') return retryWrittenOff(deps, p);
  if (!(await reopenUnsettled(deps.db, id, deps.now())))
    return { kind: 'refused', message: `payment ${id} changed meanwhile; nothing was sent, look at it again` };
  // Counted once, when it first became unsettled: a retry that fails again is not a second one.
  await finishSettling({ ...deps, countUnsettled: () => {} }, await findPayment(deps.db, id));
  return { kind: 'done', payment: await findPayment(deps.db, id) };
}

/**
 * A written-off payment: the chain decides. Its charge arrived: settled, nothing sent. Its
 * authorization is unused and still valid: settling again and the same amount sent (the operator
 * asked for it). Anything else is refused with what the chain shows, and nothing changes.
 */
async function retryWrittenOff(deps: RetryDeps, p: PaymentRow): Promise<OperatorOutcome> {
  const client = deps.clientFor(p.network);
  if (!client || p.settle_amount_atomic === null) return { kind: 'refused', message: `payment ${p.id}: no RPC for ${p.network}; nothing was changed` };
  const facts = { ...p, amount_atomic: p.settle_amount_atomic };
  const outcome = await inspectOnChain(client, facts, {
    nowSeconds: Math.floor(deps.now() / 1000),
    isClaimed: (tx) => isClaimedByOther(deps.db, p.id, p.network, tx),
  });
  if (outcome.state === 'settled' && outcome.amountAtomic.toString() === p.settle_amount_atomic) {
    if (!(await settleWrittenOff(deps.db, p.id, outcome.amountAtomic, outcome.txHash, deps.now())))
      return { kind: 'refused', message: `payment ${p.id} changed meanwhile; look at it again` };
    deps.logger.info({ payment: p.id, tx: outcome.txHash }, 'written-off upto payment found paid on chain: settled');
    return { kind: 'done', payment: await findPayment(deps.db, p.id) };
  }
  if (outcome.state === 'open') {
    if (!(await reopenUnsettled(deps.db, p.id, deps.now(), 'written_off')))
      return {
        kind: 'refused',
        message: `payment ${p.id} could not be reopened (changed meanwhile, or its payer has another open upto payment); nothing was sent`,
      };
    await finishSettling({ ...deps, countUnsettled: () => {} }, await findPayment(deps.db, p.id));
    return { kind: 'done', payment: await findPayment(deps.db, p.id) };
  }
  const shows =
    outcome.state === 'settled'
      ? `${outcome.amountAtomic} token units arrived (${outcome.txHash}), not the charge of ${p.settle_amount_atomic}`
      : outcome.state === 'void'
        ? outcome.reason
        : `its authorization is ${outcome.state}`;
  return { kind: 'refused', message: `written-off payment ${p.id}: the chain shows ${shows}; nothing was changed` };
}

export async function writeOffUpto(db: Kysely<Database>, id: string, reason: string, now = Date.now()): Promise<OperatorOutcome> {
  const p = await uptoPayment(db, id, ['unsettled']);
  if (typeof p === 'string') return { kind: 'refused', message: p };
  if (!(await writeOff(db, id, reason, now))) return { kind: 'refused', message: `payment ${id} changed meanwhile; nothing was changed, look at it again` };
  return { kind: 'done', payment: await findPayment(db, id) };
}
