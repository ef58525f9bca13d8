import type { Kysely } from 'kysely';
import { PAYMENT_STATES } from './payment-states.ts';
import type { Database, PaymentState } from '../storage/schema.ts';

/**
 * Every payment's state against the columns that project it (src/payments/states.ts): `status`
 * and `upto_state` must be what its state says, and a release kind goes with `released` and only
 * with it. Its ledger entries are held to the same state by paymentProblems (its credit) and
 * uptoProblems (its hold and release).
 */
export async function paymentStateProblems(db: Kysely<Database>): Promise<string[]> {
  const problems: string[] = [];
  const rows = await db.selectFrom('payments').select(['id', 'state', 'status', 'upto_state', 'release_kind']).orderBy('created_at').execute();
  for (const p of rows) {
    const facts = PAYMENT_STATES[p.state as PaymentState] as (typeof PAYMENT_STATES)[PaymentState] | undefined;
    if (!facts) {
      problems.push(`payment ${p.id}: unknown state ${p.state}`);
      continue;
    }
    if (p.status !== facts.status || p.upto_state !== facts.upto) {
      const read = `${p.status}/${p.upto_state ?? 'null'}`;
      problems.push(`payment ${p.id} is ${p.state} but its status/upto_state read ${read}, not ${facts.status}/${facts.upto ?? 'null'}`);
    }
    if ((p.state === 'released') !== (p.release_kind !== null)) {
      problems.push(`payment ${p.id} is ${p.state} with release kind ${p.release_kind ?? 'none'}: a release kind goes with released, and only with it`);
    }
  }
  return problems;
}
