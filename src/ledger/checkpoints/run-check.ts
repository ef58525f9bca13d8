import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { checkLedger, type LedgerCheck } from '../invariants.ts';
import { lastClosedDay, latestCheckpoint, writeCheckpoint, type Checkpoint } from './checkpoint-store.ts';
import { checkLedgerSince } from './incremental-check.ts';

export interface CheckpointedCheck extends LedgerCheck {
  /** The checkpoint the check started from (null: it checked everything). */
  from: Checkpoint | null;
  /** The checkpoint this check stored (null: none, because it failed, `full` was asked, no day closed since, or another check stored one meanwhile). */
  stored: Checkpoint | null;
}

/**
 * `tollgate admin ledger-check`: from the latest checkpoint (everything, before the first), and,
 * when that passes and a UTC day has closed since, a new checkpoint at that day's end, so the next
 * check reads only what came after. `full` checks everything and stores nothing: a check that
 * trusts no earlier one.
 */
export async function runLedgerCheck(db: Kysely<Database>, opts: { full: boolean; now?: number }): Promise<CheckpointedCheck> {
  const now = opts.now ?? Date.now();
  if (opts.full) return { ...(await checkLedger(db)), from: null, stored: null };
  const from = await latestCheckpoint(db);
  const result = from ? await checkLedgerSince(db, from) : await checkLedger(db);
  const day = lastClosedDay(now);
  const due = result.ok && (from === null || day > from.day);
  const stored = due ? await writeCheckpoint(db, from, day, now) : null;
  return { ...result, from, stored };
}

const dayOf = (cp: Checkpoint) => new Date(cp.day * 86_400_000).toISOString().slice(0, 10);

/** One line for the operator: what the check trusted and what it stored. */
export function describeCheckpoints(c: CheckpointedCheck): string {
  const from = c.from ? `checked what came after the checkpoint at the end of ${dayOf(c.from)} (--full checks all history)` : 'checked all history';
  return c.stored ? `${from}; stored a checkpoint at the end of ${dayOf(c.stored)}` : from;
}
