import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/**
 * Records SIWE nonces as used. The (address, nonce) primary key makes the first use win atomically,
 * across endpoints and across every instance sharing the database.
 */
export async function consumeNonce(db: Kysely<Database>, address: string, nonce: string, expiresAt: number): Promise<boolean> {
  const result = await db
    .insertInto('siwe_nonces')
    .values({ address: address.toLowerCase(), nonce, expires_at: expiresAt })
    .onConflict((oc) => oc.columns(['address', 'nonce']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

/** Nonces older than the validity window can never be replayed (the message is too old), so they go. */
export async function pruneNonces(db: Kysely<Database>, now = Date.now()): Promise<number> {
  const result = await db.deleteFrom('siwe_nonces').where('expires_at', '<', now).executeTakeFirst();
  return Number(result.numDeletedRows ?? 0);
}
