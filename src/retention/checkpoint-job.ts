import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { BackgroundJob } from '../background-jobs.ts';
import { latestCheckpoint } from '../ledger/checkpoints/checkpoint-store.ts';
import { runLedgerCheck, type CheckpointedCheck } from '../ledger/checkpoints/run-check.ts';
import type { Storage } from '../storage/database.ts';
import type { Database } from '../storage/schema.ts';
import { holdLease } from './job-lease.ts';
import { leasedJob } from './leased-job.ts';

const LEASE = 'ledger-checkpoints';
/**
 * The job checks all history itself (no checkpoint yet) only while the ledger is this small: on a
 * gateway with years of rows that first check takes minutes, and on SQLite runs on the event loop
 * the requests share. Beyond it the job waits for an operator's `tollgate admin ledger-check`, run
 * once from another process.
 */
export const FIRST_CHECK_MAX_ENTRIES = 100_000;

export interface CheckpointPassOptions {
  now: number;
  /** The instance's name in the lease. */
  holder: string;
  periodMs: number;
  /** A second connection to the SQLite file (see runLedgerCheck's readDb); the storage's own otherwise. */
  readDb?: Kysely<Database>;
  /** Test only (src/fail-points.ts): runs after the check passed, before its checkpoint is stored. */
  beforeStore?: () => void | Promise<void>;
}

export type CheckpointPassOutcome = { ran: false; why: 'lease' | 'no first checkpoint' } | { ran: true; check: CheckpointedCheck };

/** One pass: on the instance holding the lease, ledger-check from the latest checkpoint, storing the next when it passes. */
export async function runCheckpointPass(storage: Pick<Storage, 'db'>, o: CheckpointPassOptions): Promise<CheckpointPassOutcome> {
  const leaseMs = Math.max(3 * o.periodMs, 60_000);
  if (!(await holdLease(storage.db, LEASE, o.holder, o.now, leaseMs))) return { ran: false, why: 'lease' };
  if (!(await latestCheckpoint(storage.db)) && (await entryCount(storage.db)) > FIRST_CHECK_MAX_ENTRIES) return { ran: false, why: 'no first checkpoint' };
  return { ran: true, check: await runLedgerCheck(storage.db, { full: false, now: o.now, readDb: o.readDb, beforeStore: o.beforeStore }) };
}

/** About how many entries the ledger holds: its highest id, one index seek. */
async function entryCount(db: Kysely<Database>): Promise<number> {
  const r = await sql<{ n: number | null }>`select max(id) as n from ledger_entries`.execute(db);
  return Number(r.rows[0]?.n ?? 0);
}

export interface CheckpointJobDeps {
  periodSeconds: number;
  now: () => number;
  logger: Logger;
  failures: { inc(labels: { reason: 'problems' | 'error' }): void };
  /** SQLite: a second connection to the file for the check's snapshot, closed when the job stops. */
  reader?: Pick<Storage, 'db' | 'close'> | null;
  beforeStore?: () => void;
}

/**
 * The gateway's ledger-check checkpoint job: a pass every `periodSeconds` on the instance holding
 * the lease; a pass never overlaps the one before. A failing check stores nothing and is logged as
 * an error with what failed (wallets, amounts, ids: no secrets), and counted, as is a pass that
 * could not run (the database down): tollgate_ledger_check_failures_total and the checkpoint's age
 * (tollgate_ledger_checkpoint_age_seconds) are what an operator alerts on.
 */
export function checkpointJob(storage: Pick<Storage, 'db'>, deps: CheckpointJobDeps): BackgroundJob {
  let toldToWait = false;
  const periodMs = deps.periodSeconds * 1000;
  const report = (o: CheckpointPassOutcome) => {
    if (!o.ran) {
      if (o.why === 'no first checkpoint' && !toldToWait) deps.logger.warn('ledger checkpoints wait for a first one: run tollgate admin ledger-check once');
      toldToWait ||= o.why === 'no first checkpoint';
      return;
    }
    if (o.check.ok) return;
    deps.failures.inc({ reason: 'problems' });
    deps.logger.error(
      { problems: o.check.problems.slice(0, 50), count: o.check.problems.length, checkedFrom: o.check.from?.at ?? null },
      'ledger check failed: no checkpoint stored; run tollgate admin ledger-check --full and look at these',
    );
  };
  return leasedJob(storage.db, {
    name: 'ledger checkpoints',
    lease: LEASE,
    everyMs: periodMs,
    pass: (holder) =>
      runCheckpointPass(storage, { now: deps.now(), holder, periodMs, readDb: deps.reader?.db, beforeStore: deps.beforeStore })
        .then(report)
        .catch((err) => {
          deps.failures.inc({ reason: 'error' });
          deps.logger.warn({ err }, 'ledger checkpoint pass could not run; the next pass tries again');
        }),
    close: async () => deps.reader?.close(),
  });
}
