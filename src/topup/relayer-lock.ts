import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import type { Engine } from '../storage/database.ts';
import type { CrossInstanceLock } from './relayer-queue.ts';

/**
 * The lock that makes instances sharing one relayer key send one at a time (relayer-queue.ts):
 * a PostgreSQL advisory lock held by a transaction around the send, released by its commit, or by
 * the server when the instance dies. SQLite serves one gateway process (its file is local), so the
 * in-process queue is all it needs.
 */
export function relayerLockFor(engine: Engine, db: Kysely<Database>): CrossInstanceLock | undefined {
  if (engine !== 'postgres') return undefined;
  return (key, fn) =>
    db.transaction().execute(async (trx) => {
      await sql`select pg_advisory_xact_lock(hashtextextended(${key}, 0))`.execute(trx);
      return fn();
    });
}
