import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';

/**
 * A hold wallet's balance (an upto payer's `#upto`, a channel's `#channel`), its row locked for the
 * rest of the transaction (PostgreSQL; SQLite's writer already excludes every other), so nothing
 * spends it between this read and the hold or release that follows. A wallet never written reads 0.
 */
export async function lockedHoldWallet(trx: Kysely<Database>, wallet: string, now: number): Promise<{ balance: number; locked: number }> {
  const row = await trx
    .updateTable('wallets')
    .set({ updated_at: now })
    .where('address', '=', wallet)
    .returning(['balance_usdc', 'locked_usdc'])
    .executeTakeFirst();
  return { balance: Number(row?.balance_usdc ?? 0), locked: Number(row?.locked_usdc ?? 0) };
}
