import type { Kysely } from 'kysely';
import { auditChannelsOnChain } from './channels/channel-audit.ts';
import type { Hex, PublicClient } from 'viem';
import type { Database } from '../storage/schema.ts';
import { amountPaidBy, inspectOnChain } from './onchain.ts';
import { isClaimedByOther } from './payment-store.ts';

export interface ChainAudit {
  checked: number;
  /** Credited payments on networks with no RPC configured: not checked. */
  skipped: number;
  problems: string[];
}

/**
 * `ledger-check --chain`: each payment's state (src/payments/states.ts) against the chain. Every
 * credited payment's settling transaction is read again, and the amount its Transfer log moved from
 * the payer to payTo for this authorization must be the on-chain amount the payment recorded (and
 * so, by the column checks, its credit). No failed or released payment's authorization paid payTo
 * (see auditFailedOnChain), each upto state agrees with what arrived (auditUptoOnChain), and each
 * batch-settlement channel's mirror agrees with the contract (channels/channel-audit.ts).
 */
export async function auditCreditsOnChain(db: Kysely<Database>, clientFor: (network: string) => PublicClient | undefined): Promise<ChainAudit> {
  const audit: ChainAudit = { checked: 0, skipped: 0, problems: [] };
  const credited = await db.selectFrom('payments').selectAll().where('state', '=', 'credited').orderBy('credited_at').execute();
  for (const p of credited) {
    const client = countedClient(clientFor, p.network, audit);
    if (!client) continue;
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
  await auditFailedOnChain(db, clientFor, audit);
  await auditUptoOnChain(db, clientFor, audit);
  const channels = await auditChannelsOnChain(db, clientFor);
  audit.checked += channels.checked;
  audit.skipped += channels.skipped;
  audit.problems.push(...channels.problems);
  return audit;
}

/**
 * Per upto payment, what arrived on chain for its authorization against its charge
 * (settle_amount_atomic), never its signed maximum: a settled one must show exactly the charge (0:
 * no transfer at all); an unsettled or written-off one whose authorization paid after all is
 * named, so the operator retries it (the retry then reads the chain and closes it).
 */
async function auditUptoOnChain(db: Kysely<Database>, clientFor: (network: string) => PublicClient | undefined, audit: ChainAudit): Promise<void> {
  const rows = await db.selectFrom('payments').selectAll().where('state', 'in', ['settled', 'unsettled', 'written_off']).orderBy('updated_at').execute();
  for (const p of rows) {
    const client = countedClient(clientFor, p.network, audit);
    if (!client) continue;
    const facts = { ...p, amount_atomic: p.settle_amount_atomic ?? '0' };
    try {
      const outcome = await inspectOnChain(client, facts, {
        nowSeconds: Math.floor(Date.now() / 1000),
        isClaimed: (tx) => isClaimedByOther(db, p.id, p.network, tx),
      });
      const arrived = outcome.state === 'settled' ? outcome.amountAtomic.toString() : '0';
      if (p.state === 'settled' && arrived !== p.settle_amount_atomic)
        audit.problems.push(`upto payment ${p.id}: ${arrived} token units arrived on chain for a charge of ${p.settle_amount_atomic}`);
      if (p.state !== 'settled' && arrived !== '0')
        audit.problems.push(`upto payment ${p.id} is ${p.state} but ${arrived} token units arrived on chain for it: run tollgate admin upto retry ${p.id}`);
    } catch (err) {
      audit.problems.push(`upto payment ${p.id}: could not read its authorization on ${p.network} (${(err as Error).name})`);
    }
  }
}

/** The RPC client for a payment to check, counted as checked, or undefined (counted as skipped) when its network has none. */
function countedClient(clientFor: (network: string) => PublicClient | undefined, network: string, audit: ChainAudit): PublicClient | undefined {
  const client = clientFor(network);
  if (client) audit.checked++;
  else audit.skipped++;
  return client;
}

/**
 * A failed payment whose authorization was used after all, with a transfer to payTo, is money
 * received and never credited (a released settlement mined later). The
 * reconciler credits these while it watches them; one still failed here is a problem to fix with
 * `tollgate admin`. Rows that already record an on-chain amount (a mismatch, see creditPayment)
 * say so in their own reason and are not repeated here.
 */
async function auditFailedOnChain(db: Kysely<Database>, clientFor: (network: string) => PublicClient | undefined, audit: ChainAudit): Promise<void> {
  const failed = await db
    .selectFrom('payments')
    .selectAll()
    .where('state', 'in', ['failed', 'released'])
    .where('onchain_amount_atomic', 'is', null)
    .orderBy('updated_at')
    .execute();
  for (const p of failed) {
    const client = clientFor(p.network);
    if (!client) continue;
    try {
      const outcome = await inspectOnChain(client, p, {
        nowSeconds: Math.floor(Date.now() / 1000),
        isClaimed: (tx) => isClaimedByOther(db, p.id, p.network, tx),
      });
      if (outcome.state === 'settled') {
        audit.problems.push(
          `payment ${p.id} is ${p.state} (${p.failure_reason}) but ${outcome.txHash} on ${p.network} moved ${outcome.amountAtomic} token units from ${p.payer} to ${p.pay_to} for its authorization: paid, never credited`,
        );
      }
    } catch (err) {
      audit.problems.push(`payment ${p.id}: could not read its authorization on ${p.network} (${(err as Error).name})`);
    }
  }
}
