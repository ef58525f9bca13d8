import { sql, type Kysely } from 'kysely';
import { latestCheckpoint } from '../ledger/checkpoints/checkpoint-store.ts';
import { runLedgerCheck, type CheckpointedCheck, type LedgerCheckOptions } from '../ledger/checkpoints/run-check.ts';
import type { Database } from '../storage/schema.ts';

/**
 * The job checks all history itself (no checkpoint yet) only while the ledger is this small: on a
 * gateway with years of rows that first check takes minutes. Beyond it the job waits for an
 * operator's `tollgate admin ledger-check`, run once from another process.
 */
export const FIRST_CHECK_MAX_ENTRIES = 100_000;

/** What a pass of the checkpoint job did once it held the lease. */
export type CheckpointCheckOutcome = { ran: false; why: 'no first checkpoint' } | { ran: true; check: CheckpointedCheck };

export type CheckpointCheckOptions = Pick<LedgerCheckOptions, 'beforeStore' | 'beforeCommit'> & { now: number };

/**
 * The part of a pass after the lease: ledger-check from the latest checkpoint, storing the next
 * when it passes. Plain data in and out, so it runs the same on the event loop (PostgreSQL, whose
 * queries run in the server) and in the checkpoint worker (SQLite, checkpoint-thread.ts).
 */
export async function checkSinceLatestCheckpoint(db: Kysely<Database>, o: CheckpointCheckOptions): Promise<CheckpointCheckOutcome> {
  if (!(await latestCheckpoint(db)) && (await entryCount(db)) > FIRST_CHECK_MAX_ENTRIES) return { ran: false, why: 'no first checkpoint' };
  return { ran: true, check: await runLedgerCheck(db, { full: false, ...o }) };
}

/** About how many entries the ledger holds: its highest id, one index seek. */
async function entryCount(db: Kysely<Database>): Promise<number> {
  const r = await sql<{ n: number | null }>`select max(id) as n from ledger_entries`.execute(db);
  return Number(r.rows[0]?.n ?? 0);
}

/**
 * TEST ONLY ways a pass fails (src/fail-points.ts): `before-store` throws after the check passed;
 * in the worker only, `crash-in-store` ends the thread inside the store's transaction after the
 * sums were added, and `hang` never finishes.
 */
export type CheckpointFailPoint = 'before-store' | 'crash-in-store' | 'hang';

export function failPointHooks(failPoint: CheckpointFailPoint | null | undefined): Pick<CheckpointCheckOptions, 'beforeStore' | 'beforeCommit'> {
  if (failPoint === 'before-store')
    return {
      beforeStore: () => {
        throw new Error('TEST HOOK: checkpoint pass stopped before its store');
      },
    };
  // In a worker thread process.exit ends the thread only, as a crash of the thread would.
  if (failPoint === 'crash-in-store') return { beforeCommit: () => process.exit(1) };
  if (failPoint === 'hang') return { beforeStore: () => new Promise<void>(() => setInterval(() => undefined, 60_000)) };
  return {};
}
