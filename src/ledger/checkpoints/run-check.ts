import type { Kysely } from 'kysely';
import type { Database } from '../../storage/schema.ts';
import { checkLedger, type LedgerCheck } from '../invariants.ts';
import { readBoundary } from './boundary.ts';
import { checkpointSums, latestCheckpoint, storeCheckpoint, type Checkpoint, type CheckpointSums } from './checkpoint-store.ts';
import { checkLedgerSince } from './incremental-check.ts';
import { inSnapshot } from './snapshot.ts';

export interface CheckpointedCheck extends LedgerCheck {
  /** The checkpoint the check started from (null: it checked everything). */
  from: Checkpoint | null;
  /** The checkpoint this check stored (null: none, because it failed, `full` was asked, or another check stored one meanwhile). */
  stored: Checkpoint | null;
}

export interface LedgerCheckOptions {
  full: boolean;
  /** The moment of the check (tests move it); the checkpoint's boundary is read at it, or just after the latest checkpoint's. */
  now?: number;
  /** Test only (src/fail-points.ts): runs after the check passed, before its checkpoint is stored. */
  beforeStore?: () => void | Promise<void>;
  /** Test only: runs inside the store's transaction, after the sums were added and before the checkpoint row and the commit. */
  beforeCommit?: () => void | Promise<void>;
  /** false: check only, store no checkpoint (the bench times the same check three times over one checkpoint). */
  store?: boolean;
}

/**
 * `tollgate admin ledger-check` and the gateway's checkpoint job: from the latest checkpoint
 * (everything, before the first) and, when that passes, a new checkpoint at the boundary read
 * before the check (readBoundary), so the next check reads only what came after. The check and the
 * checkpoint's sums read one snapshot, which holds every row at or below the boundary and the
 * writes of the live gateway only as whole write units. `full` checks everything and stores
 * nothing: a check that trusts no earlier one.
 */
export async function runLedgerCheck(db: Kysely<Database>, opts: LedgerCheckOptions): Promise<CheckpointedCheck> {
  if (opts.full) return { ...(await inSnapshot(db, checkLedger)), from: null, stored: null };
  const from = await latestCheckpoint(db);
  // Checkpoints follow each other in time even when a clock steps back: the latest is the one read.
  const now = () => Math.max(opts.now ?? Date.now(), (from?.at ?? 0) + 1);
  const boundary = await readBoundary(db, now);
  const { result, sums, checkedFrom } = await inSnapshot(db, async (snap) => {
    // The per-wallet sums kept are the latest checkpoint's. Another check (an operator's beside the job) may have stored
    // one since `from` was read: then the snapshot's sums are that one's, and the check starts from it and stores nothing.
    const seen = await latestCheckpoint(snap);
    const checkedFrom = seen?.at === from?.at ? from : seen;
    const result = checkedFrom ? await checkLedgerSince(snap, checkedFrom) : await checkLedger(snap);
    const storing = result.ok && opts.store !== false && checkedFrom === from;
    const sums: CheckpointSums | null = storing ? await checkpointSums(snap, from, boundary, now()) : null;
    return { result, sums, checkedFrom };
  });
  if (!sums) return { ...result, from: checkedFrom, stored: null };
  await opts.beforeStore?.();
  return { ...result, from, stored: await storeCheckpoint(db, from, sums, opts.beforeCommit) };
}

const timeOf = (cp: Checkpoint) => new Date(cp.at).toISOString().replace('.000Z', 'Z');

/** One line for the operator: what the check trusted and what it stored. */
export function describeCheckpoints(c: CheckpointedCheck): string {
  const from = c.from ? `checked what came after the checkpoint at ${timeOf(c.from)} (--full checks all history)` : 'checked all history';
  return c.stored ? `${from}; stored a checkpoint at ${timeOf(c.stored)}` : from;
}
