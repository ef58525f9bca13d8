import { sql, type Kysely } from 'kysely';
import { InsufficientBalanceError } from '../storage/constraint-errors.ts';
import type { Database, LedgerKind } from '../storage/schema.ts';
import { assertWalletFloor } from './assert.ts';

export interface LedgerMovement {
  wallet: string;
  kind: LedgerKind;
  /** Micro-USDC; positive adds to the balance, negative removes from it. */
  amountUsdc: number;
  reference?: string | null;
  note?: string | null;
}

/**
 * Appends one ledger entry and moves the wallet balance by the same amount. Call it inside the
 * transaction that also records the cause (payment settled, code redeemed), so the two commit
 * together. A negative movement that would take the balance below the locked amount or below zero
 * is refused by the database CHECKs, and the whole transaction rolls back.
 */
export async function applyMovement(trx: Kysely<Database>, m: LedgerMovement, now = Date.now()): Promise<void> {
  if (!Number.isSafeInteger(m.amountUsdc) || m.amountUsdc === 0) {
    throw new RangeError(`ledger amount must be a non-zero safe integer, got ${m.amountUsdc}`);
  }
  const wallet = m.wallet.toLowerCase();
  let after: { balance_usdc: number; locked_usdc: number } | undefined;
  if (m.amountUsdc > 0) {
    after = await trx
      .insertInto('wallets')
      .values({ address: wallet, balance_usdc: m.amountUsdc, locked_usdc: 0, created_at: now, updated_at: now })
      .onConflict((oc) =>
        oc.column('address').doUpdateSet({
          balance_usdc: sql`wallets.balance_usdc + ${m.amountUsdc}`,
          updated_at: now,
        }),
      )
      .returning(['balance_usdc', 'locked_usdc'])
      .executeTakeFirst();
  } else {
    // Not an upsert: both engines check the CHECKs on the row an INSERT proposes, before the conflict
    // branch runs, so a negative proposed balance would fail even for a wallet that can pay.
    after = await trx
      .updateTable('wallets')
      .set({ balance_usdc: sql`balance_usdc + ${m.amountUsdc}`, updated_at: now })
      .where('address', '=', wallet)
      .returning(['balance_usdc', 'locked_usdc'])
      .executeTakeFirst();
    if (!after) throw new InsufficientBalanceError(wallet);
  }
  // The database CHECKs refuse the same; this names the movement when a CHECK was lost or loosened.
  if (after) assertWalletFloor(wallet, Number(after.balance_usdc), Number(after.locked_usdc));
  await trx
    .insertInto('ledger_entries')
    .values({
      wallet,
      kind: m.kind,
      amount_usdc: m.amountUsdc,
      reference: m.reference ?? null,
      note: m.note ?? null,
      created_at: now,
    })
    .execute();
}

/**
 * An adjustment in its own transaction: `tollgate admin credit`, and the funding of wallets in tests
 * and benchmarks.
 */
export function adjustBalance(db: Kysely<Database>, m: Omit<LedgerMovement, 'kind'>): Promise<void> {
  return db.transaction().execute((trx) => applyMovement(trx, { ...m, kind: 'adjustment' }));
}
