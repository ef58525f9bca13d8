import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

/**
 * A lease in the database naming the one instance that runs a job until it expires: the holder
 * renews it each pass; another instance takes it only once it has run out (its holder stopped or
 * died). One conditional update decides, so two instances never both hold it.
 */
export async function holdLease(db: Kysely<Database>, name: string, holder: string, now: number, ttlMs: number): Promise<boolean> {
  await db
    .insertInto('job_leases')
    .values({ name, holder, expires_at: 0 })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const taken = await db
    .updateTable('job_leases')
    .set({ holder, expires_at: now + ttlMs })
    .where('name', '=', name)
    .where((eb) => eb.or([eb('holder', '=', holder), eb('expires_at', '<', now)]))
    .executeTakeFirst();
  return Number(taken.numUpdatedRows) === 1;
}

/** Gives the lease up at a clean stop, so another instance need not wait for it to run out. */
export async function releaseLease(db: Kysely<Database>, name: string, holder: string): Promise<void> {
  await db.updateTable('job_leases').set({ expires_at: 0 }).where('name', '=', name).where('holder', '=', holder).execute();
}

/** One named lease, for a job defined where this module cannot be imported (the payment jobs: src/payments/channels/claims/). */
export interface NamedLease {
  hold(holder: string, now: number, ttlMs: number): Promise<boolean>;
  release(holder: string): Promise<void>;
}

export const namedLease = (db: Kysely<Database>, name: string): NamedLease => ({
  hold: (holder, now, ttlMs) => holdLease(db, name, holder, now, ttlMs),
  release: (holder) => releaseLease(db, name, holder),
});
