import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

export interface Balance {
  balance_usdc: number;
  locked_usdc: number;
  available_usdc: number;
}

/** A wallet's balance; a wallet we have never seen has a zero balance, never a 404. */
export async function getBalance(db: Kysely<Database>, wallet: string): Promise<Balance> {
  const row = await db.selectFrom('wallets').select(['balance_usdc', 'locked_usdc']).where('address', '=', wallet.toLowerCase()).executeTakeFirst();
  const balance = Number(row?.balance_usdc ?? 0);
  const locked = Number(row?.locked_usdc ?? 0);
  return { balance_usdc: balance, locked_usdc: locked, available_usdc: balance - locked };
}

/** Makes sure the wallet row exists (zero balance), so it can be locked and referenced. */
export async function ensureWallet(db: Kysely<Database>, wallet: string, now = Date.now()): Promise<void> {
  await db
    .insertInto('wallets')
    .values({ address: wallet.toLowerCase(), balance_usdc: 0, locked_usdc: 0, created_at: now, updated_at: now })
    .onConflict((oc) => oc.column('address').doNothing())
    .execute();
}

/**
 * Serialises writers on one wallet for the rest of the transaction. PostgreSQL takes a row lock;
 * SQLite needs nothing, since a write transaction there already excludes every other writer.
 */
export async function lockWallet(trx: Kysely<Database>, engine: 'sqlite' | 'postgres', wallet: string): Promise<void> {
  await ensureWallet(trx, wallet);
  if (engine === 'postgres') {
    await trx.selectFrom('wallets').select('address').where('address', '=', wallet.toLowerCase()).forUpdate().execute();
  }
}
