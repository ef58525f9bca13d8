import { PostgresAdapter, type Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';

/**
 * Runs `read` in one snapshot of the database, so a check on a live gateway compares a wallet's
 * balance with its entries as one write unit left them, never halfway through another's.
 * PostgreSQL: a read-only REPEATABLE READ transaction (its snapshot is taken at its first
 * statement). SQLite (WAL): a read transaction sees the database as of its first read while the
 * writer goes on.
 */
export async function inSnapshot<T>(db: Kysely<Database>, read: (snap: Kysely<Database>) => Promise<T>): Promise<T> {
  let trx = db.transaction();
  if (db.getExecutor().adapter instanceof PostgresAdapter) trx = trx.setIsolationLevel('repeatable read').setAccessMode('read only');
  return trx.execute(read);
}
