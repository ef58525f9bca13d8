import { setTimeout as sleep } from 'node:timers/promises';
import { PostgresAdapter, sql, type Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';

/** The id boundaries of a checkpoint: every row at or below them is committed, so a checkpoint's sums over them never change. */
export interface Boundary {
  /** When the ids were read (epoch ms): the checkpoint's `at`. */
  at: number;
  last_entry_id: number;
  last_usage_id: number;
  last_reservation_id: number;
}

/** How long a boundary waits for the transactions in progress when it was read; longer, the pass fails and the next tries again. */
export const IN_FLIGHT_WAIT_MS = 30_000;
const POLL_MS = 10;

export class InFlightTimeout extends Error {}

/**
 * The highest ids of the three tables a checkpoint covers, once no row at or below them can still
 * appear.
 *
 * SQLite: an id is handed out under the single write lock and the row is visible at the commit
 * that releases it, so the highest committed id has no uncommitted row below it. No wait.
 *
 * PostgreSQL: an id comes from a sequence before its transaction commits, so rows below the
 * highest committed id may still be in flight. Such a row's transaction took its id before the one
 * read here (a sequence hands ids out in order), so it had started before the read. The boundary
 * therefore lists, after reading the ids, every transaction then open (each holds a lock on its
 * own virtual transaction id for its whole life, pg_locks) and waits until all of them have ended:
 * committed, their rows are visible below the boundary; rolled back, they never will be. This is
 * how PostgreSQL's own CREATE INDEX CONCURRENTLY waits for older transactions. Not the xid
 * snapshot (pg_current_snapshot): a transaction whose first write is the insert has no xid yet
 * when its INSERT draws the id, so an xmin wait could miss it. A transaction held open longer than
 * IN_FLIGHT_WAIT_MS (an operator's idle psql session) fails the pass rather than stall it.
 */
export async function readBoundary(db: Kysely<Database>, now: () => number, waitMs = IN_FLIGHT_WAIT_MS): Promise<Boundary> {
  const at = now();
  const max = (table: string) => sql<number>`(select coalesce(max(id), 0) from ${sql.table(table)})`;
  const ids = await sql<{
    e: number;
    u: number;
    r: number;
  }>`select ${max('ledger_entries')} as e, ${max('request_usage')} as u, ${max('reservations')} as r`.execute(db);
  const row = ids.rows[0];
  const boundary = { at, last_entry_id: Number(row?.e ?? 0), last_usage_id: Number(row?.u ?? 0), last_reservation_id: Number(row?.r ?? 0) };
  if (db.getExecutor().adapter instanceof PostgresAdapter) await waitForOpenTransactions(db, waitMs);
  return boundary;
}

async function waitForOpenTransactions(db: Kysely<Database>, waitMs: number): Promise<void> {
  // Only this database's sessions: the server may hold others, whose transactions write no row here.
  const open = await sql<{ vxid: string }>`select l.virtualxid as vxid from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'virtualxid' and l.granted and l.pid <> pg_backend_pid() and a.datname = current_database()`.execute(db);
  const vxids = open.rows.map((r) => r.vxid);
  const deadline = Date.now() + waitMs;
  while (vxids.length > 0) {
    const still = await sql<{ n: number }>`select count(*) as n from pg_locks
      where locktype = 'virtualxid' and granted and virtualxid = any(${vxids})`.execute(db);
    if (Number(still.rows[0]?.n ?? 0) === 0) return;
    if (Date.now() > deadline) throw new InFlightTimeout(`a database transaction has been open over ${waitMs / 1000} s; no checkpoint this pass`);
    await sleep(POLL_MS);
  }
}
