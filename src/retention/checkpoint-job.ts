import type { Logger } from 'pino';
import type { BackgroundJob } from '../background-jobs.ts';
import type { Storage } from '../storage/database.ts';
import { checkSinceLatestCheckpoint, failPointHooks, type CheckpointCheckOutcome, type CheckpointFailPoint } from './checkpoint-check.ts';
import { checkpointThread, CheckpointPassStopped } from './checkpoint-thread.ts';
import { holdLease } from './job-lease.ts';
import { leasedJob } from './leased-job.ts';

export { FIRST_CHECK_MAX_ENTRIES } from './checkpoint-check.ts';

const LEASE = 'ledger-checkpoints';

/** How long a pass holds the job's lease: it outlives a slow pass, and an instance gone for good frees it within minutes. */
export const leaseMsFor = (periodMs: number): number => Math.max(3 * periodMs, 60_000);

export interface CheckpointPassOptions {
  now: number;
  /** The instance's name in the lease. */
  holder: string;
  periodMs: number;
  /** Where the check and the store run: by default here, on `storage`; the SQLite gateway's job passes its worker thread's. */
  check?: (now: number) => Promise<CheckpointCheckOutcome>;
  /** Test only (src/fail-points.ts): runs after the check passed, before its checkpoint is stored (the check run here only). */
  beforeStore?: () => void | Promise<void>;
}

export type CheckpointPassOutcome = { ran: false; why: 'lease' } | CheckpointCheckOutcome;

/** One pass: on the instance holding the lease, ledger-check from the latest checkpoint, storing the next when it passes. */
export async function runCheckpointPass(storage: Pick<Storage, 'db'>, o: CheckpointPassOptions): Promise<CheckpointPassOutcome> {
  if (!(await holdLease(storage.db, LEASE, o.holder, o.now, leaseMsFor(o.periodMs)))) return { ran: false, why: 'lease' };
  return o.check ? o.check(o.now) : checkSinceLatestCheckpoint(storage.db, { now: o.now, beforeStore: o.beforeStore });
}

export interface CheckpointJobDeps {
  periodSeconds: number;
  now: () => number;
  logger: Logger;
  failures: { inc(labels: { reason: 'problems' | 'error' }): void };
  /**
   * A SQLite file's URL: each pass's check and store run in a worker thread on a connection of its
   * own (checkpoint-thread.ts). Null (PostgreSQL, whose queries run in the server; an in-memory
   * SQLite no second connection can reach): on this thread, on the storage's connection.
   */
  workerDatabaseUrl?: string | null;
  /** How long a pass in the worker may run before it is ended as hung: by default the lease's length, past which another instance may take over. */
  passDeadlineMs?: number;
  failPoint?: CheckpointFailPoint | null;
}

/**
 * The gateway's ledger-check checkpoint job: a pass every `periodSeconds` on the instance holding
 * the lease; a pass never overlaps the one before. A failing check stores nothing and is logged as
 * an error with what failed (wallets, amounts, ids: no secrets), and counted, as is a pass that
 * could not run (the database down, the worker crashed or hung): tollgate_ledger_check_failures_total
 * and the checkpoint's age (tollgate_ledger_checkpoint_age_seconds) are what an operator alerts on.
 */
export function checkpointJob(storage: Pick<Storage, 'db'>, deps: CheckpointJobDeps): BackgroundJob {
  let toldToWait = false;
  const periodMs = deps.periodSeconds * 1000;
  const thread = deps.workerDatabaseUrl
    ? checkpointThread(deps.workerDatabaseUrl, { deadlineMs: deps.passDeadlineMs ?? leaseMsFor(periodMs), failPoint: deps.failPoint })
    : null;
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
  const beforeStore = failPointHooks(deps.failPoint === 'before-store' ? deps.failPoint : null).beforeStore;
  return leasedJob(storage.db, {
    name: 'ledger checkpoints',
    lease: LEASE,
    everyMs: periodMs,
    pass: (holder) =>
      runCheckpointPass(storage, { now: deps.now(), holder, periodMs, check: thread?.check, beforeStore })
        .then(report)
        .catch((err) => {
          if (err instanceof CheckpointPassStopped) return;
          deps.failures.inc({ reason: 'error' });
          deps.logger.warn({ err }, 'ledger checkpoint pass could not run; the next pass tries again');
        }),
    interrupt: thread ? () => thread.stop() : undefined,
  });
}
