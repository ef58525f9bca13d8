import type { Kysely } from 'kysely';
import type { Hex, PublicClient } from 'viem';
import type { Database } from '../storage/schema.ts';
import { amountPaidBy } from './onchain.ts';

export interface ChainAudit {
  checked: number;
  /** Credited payments on networks with no RPC configured: not checked. */
  skipped: number;
  problems: string[];
}

/**
 * `ledger-check --chain`: every credited payment's settling transaction is read again, and the
 * amount its Transfer log moved from the payer to payTo for this authorization must be the on-chain
 * amount the payment recorded (and so, by the column checks, its credit).
 */
export async function auditCreditsOnChain(db: Kysely<Database>, clientFor: (network: string) => PublicClient | undefined): Promise<ChainAudit> {
  const audit: ChainAudit = { checked: 0, skipped: 0, problems: [] };
  const credited = await db.selectFrom('payments').selectAll().where('status', '=', 'credited').orderBy('credited_at').execute();
  for (const p of credited) {
    const client = clientFor(p.network);
    if (!client) {
      audit.skipped++;
      continue;
    }
    audit.checked++;
    let paid: bigint | null;
    try {
      paid = p.tx_hash ? await amountPaidBy(client, p.tx_hash as Hex, p) : null;
    } catch (err) {
      audit.problems.push(`payment ${p.id}: could not read ${p.tx_hash} on ${p.network} (${(err as Error).name})`);
      continue;
    }
    if (paid === null) audit.problems.push(`payment ${p.id}: ${p.tx_hash} on ${p.network} moved nothing from ${p.payer} to ${p.pay_to} for this authorization`);
    else if (paid.toString() !== p.onchain_amount_atomic) {
      audit.problems.push(`payment ${p.id}: ${p.tx_hash} moved ${paid} token units to payTo, the payment records ${p.onchain_amount_atomic ?? 'none'}`);
    }
  }
  return audit;
}
