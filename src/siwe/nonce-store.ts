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

/**
 * How long past its expiry a used nonce is kept before it is deleted. Its expiry is set by the clock
 * of the instance that verified it and the pruning runs on any instance, by that one's clock: with
 * the expiry alone, an instance whose clock ran more than `siwe.clockSkewSeconds` ahead deleted a
 * nonce that a slower instance still accepted the message of, and the proof was replayed. An hour
 * covers any fleet whose clocks are synchronised at all; the rows cost a few bytes per proof.
 */
export const NONCE_PRUNE_MARGIN_MS = 60 * 60 * 1000;

/** Nonces whose message is too old for every instance, by a margin for instances' clocks (above), so they go. */
export async function pruneNonces(db: Kysely<Database>, now = Date.now()): Promise<number> {
  const result = await db
    .deleteFrom('siwe_nonces')
    .where('expires_at', '<', now - NONCE_PRUNE_MARGIN_MS)
    .executeTakeFirst();
  return Number(result.numDeletedRows ?? 0);
}
