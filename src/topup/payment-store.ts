import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { getBalance } from '../ledger/balances.ts';
import { applyMovement, isUniqueViolation } from '../ledger/credits.ts';
import type { Database, PaymentTable } from '../storage/schema.ts';
import type { MatchedPayment } from './match.ts';

export type PaymentRow = Selectable<PaymentTable>;

/** The ledger reference of a payment's credit: one credit per payment, by the unique index. */
export const ledgerReference = (paymentId: string) => `payment:${paymentId}`;

export type OpenResult =
  /** This request owns the attempt: verify and settle it. */
  | { kind: 'claimed'; row: PaymentRow }
  /** The same authorization is recorded already; `row` says how far it got. */
  | { kind: 'existing'; row: PaymentRow; samePayload: boolean };

/**
 * Records the payment before anything is sent, or finds the record of the same authorization.
 * A failed attempt can be claimed again (the payer may have added funds or approved Permit2 since),
 * by exactly one request at a time.
 */
export async function openPayment(db: Kysely<Database>, m: MatchedPayment, fromBlock: number, now: number): Promise<OpenResult> {
  const id = randomUUID();
  const i = m.identity;
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
        amount_usdc: usdcFor(m),
        payload_digest: m.digest,
        valid_before: i.validBefore,
        from_block: fromBlock,
        status: 'pending',
        tx_hash: null,
        failure_reason: null,
        balance_after_usdc: null,
        locked_after_usdc: null,
        created_at: now,
        updated_at: now,
        credited_at: null,
      })
      .execute();
    return { kind: 'claimed', row: await findPayment(db, id) };
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
  }
  const existing = await db
    .selectFrom('payments')
    .selectAll()
    .where('network', '=', i.network)
    .where('asset', '=', i.asset)
    .where('payer', '=', i.payer)
    .where('nonce', '=', i.nonce)
    .executeTakeFirstOrThrow();
  if (existing.status === 'failed') {
    const reopened = await db
      .updateTable('payments')
      .set({ status: 'pending', failure_reason: null, payload_digest: m.digest, amount_usdc: usdcFor(m), updated_at: now })
      .where('id', '=', existing.id)
      .where('status', '=', 'failed')
      .executeTakeFirst();
    if (Number(reopened.numUpdatedRows) === 1) return { kind: 'claimed', row: await findPayment(db, existing.id) };
  }
  const row = await findPayment(db, existing.id);
  return { kind: 'existing', row, samePayload: row.payload_digest === m.digest };
}

/** Micro-USDC credited: the offer's amount, 1 token = 1 USD, in 6-decimal units. */
function usdcFor(m: MatchedPayment): number {
  return Number(BigInt(m.identity.amountAtomic) / 10n ** BigInt(m.offer.config.decimals - 6));
}

export function findPayment(db: Kysely<Database>, id: string): Promise<PaymentRow> {
  return db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

export async function markSubmitted(db: Kysely<Database>, id: string, txHash: string, now = Date.now()): Promise<void> {
  await db
    .updateTable('payments')
    .set({ status: 'submitted', tx_hash: txHash.toLowerCase(), updated_at: now })
    .where('id', '=', id)
    .where('status', 'in', ['pending', 'submitted'])
    .execute();
}

export async function markFailed(db: Kysely<Database>, id: string, reason: string, now = Date.now()): Promise<void> {
  await db
    .updateTable('payments')
    .set({ status: 'failed', failure_reason: reason.slice(0, 200), updated_at: now })
    .where('id', '=', id)
    .where('status', 'in', ['pending', 'submitted'])
    .execute();
}

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

/**
 * Marks the payment credited and credits the payer, in one transaction, exactly once: the status
 * update only succeeds for a payment not yet credited, and the ledger's unique (kind, reference)
 * index refuses a second credit even if two instances race. Returns the credited row.
 */
export async function creditPayment(db: Kysely<Database>, id: string, txHash: string, now = Date.now()): Promise<PaymentRow> {
  try {
    await db.transaction().execute(async (trx) => {
      const updated = await trx
        .updateTable('payments')
        .set({ status: 'credited', tx_hash: txHash.toLowerCase(), failure_reason: null, credited_at: now, updated_at: now })
        .where('id', '=', id)
        .where('status', '!=', 'credited')
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) !== 1) return; // credited already: nothing to do
      const p = await trx.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      await applyMovement(trx, { wallet: p.payer, kind: 'topup', amountUsdc: Number(p.amount_usdc), reference: ledgerReference(id), note: `x402 ${p.network} ${txHash}` }, now);
      const balance = await getBalance(trx, p.payer);
      await trx.updateTable('payments').set({ balance_after_usdc: balance.balance_usdc, locked_after_usdc: balance.locked_usdc }).where('id', '=', id).execute();
    });
  } catch (err) {
    // Another instance credited it between our check and our insert: that credit stands.
    if (!isUniqueViolation(err)) throw err;
  }
  return findPayment(db, id);
}

/** Payments still open (not credited, not failed), oldest first: the reconciler's work list. */
export function openPayments(db: Kysely<Database>, limit = 100): Promise<PaymentRow[]> {
  return db
    .selectFrom('payments')
    .selectAll()
    .where('status', 'in', ['pending', 'submitted'])
    .orderBy('updated_at')
    .limit(limit)
    .execute();
}
