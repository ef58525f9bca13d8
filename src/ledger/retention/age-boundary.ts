import { sql, type Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';

/**
 * About the first id of `table` created at or after `cutoff`, at most `covered`: a binary search
 * over the primary key (a few dozen index seeks) rather than a scan, since ids are handed out in
 * time order. A batch then reads only ids below it, which are old enough but for the few a clock
 * skew or a long write put out of order (its own `created_at < cutoff` still decides each row).
 * Without it, a table none of whose rows has reached the window yet is read whole on every pass:
 * on SQLite, on the event loop and on the connection the ledger's group commit waits for.
 */
export async function idsOlderThan(db: Kysely<Database>, table: 'reservations' | 'request_usage', cutoff: number, covered: number): Promise<number> {
  const firstFrom = async (id: number) =>
    (await sql<{ id: number; created_at: number }>`select id, created_at from ${sql.table(table)} where id >= ${id} order by id limit 1`.execute(db)).rows[0];
  let lo = 0;
  let hi = covered + 1;
  // Invariant: rows below lo were created before the cutoff; the row at or after hi (if any) was not.
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const row = await firstFrom(mid);
    if (!row || Number(row.id) >= hi) hi = mid;
    else if (Number(row.created_at) < cutoff) lo = Number(row.id) + 1;
    else hi = mid;
  }
  return Math.min(lo, covered + 1) - 1;
}
