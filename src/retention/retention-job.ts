import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { BackgroundJob } from '../background-jobs.ts';
import type { RetentionConfig } from '../config/schema.ts';
import { DAY_MS } from '../ledger/days.ts';
import { latestCheckpoint } from '../ledger/checkpoints/checkpoint-store.ts';
import type { Storage } from '../storage/database.ts';
import { holdLease } from './job-lease.ts';
import { leasedJob } from './leased-job.ts';
import { retireReservationBatch } from '../ledger/retention/retire-reservations.ts';
import { retireUsageBatch } from '../ledger/retention/retire-usage.ts';
import { idsOlderThan } from '../ledger/retention/age-boundary.ts';

/** A pass stops after this long even with rows left: the next tick goes on, and the gateway's own writes come first. */
const PASS_BUDGET_MS = 2_000;
const LEASE = 'retention';

export interface RetentionPassOptions {
  now: number;
  /** The instance's name in the lease. */
  holder: string;
  /** Test only (src/fail-points.ts): throws after a usage batch's export, before its delete. */
  afterExport?: () => void | Promise<void>;
  budgetMs?: number;
}

export interface RetentionPassOutcome {
  /** False when another instance holds the lease, or no checkpoint covers anything yet. */
  ran: boolean;
  reservations: number;
  usage: number;
}

/**
 * One retention pass: batches of finished reservations, then of usage rows, each older than its
 * window (read only below the ids that are, see idsOlderThan) and covered by the latest
 * ledger-check checkpoint (nothing unproven leaves), until both
 * come back short or the budget is spent. The event loop is given back between batches.
 */
export async function runRetentionPass(storage: Pick<Storage, 'db'>, config: RetentionConfig, o: RetentionPassOptions): Promise<RetentionPassOutcome> {
  const outcome = { ran: false, reservations: 0, usage: 0 };
  const budgetMs = o.budgetMs ?? PASS_BUDGET_MS;
  const leaseMs = Math.max(3 * config.everySeconds * 1000, 3 * budgetMs);
  if (!(await holdLease(storage.db, LEASE, o.holder, o.now, leaseMs))) return outcome;
  const checkpoint = await latestCheckpoint(storage.db);
  if (!checkpoint) return outcome;
  outcome.ran = true;
  const started = Date.now();
  const usageCutoff = o.now - config.usageDays * DAY_MS;
  const reservationCutoff = o.now - config.reservationDays * DAY_MS;
  const reservationBatch = {
    cutoff: reservationCutoff,
    unbilledCutoff: usageCutoff,
    provenUsageId: checkpoint.last_usage_id,
    coveredId: await idsOlderThan(storage.db, 'reservations', reservationCutoff, checkpoint.last_reservation_id),
    rows: config.batchRows,
  };
  const usageBatch = {
    cutoff: usageCutoff,
    coveredId: await idsOlderThan(storage.db, 'request_usage', usageCutoff, checkpoint.last_usage_id),
    rows: config.batchRows,
    afterExport: o.afterExport,
  };
  while (Date.now() - started < budgetMs) {
    const reservations = await retireReservationBatch(storage, reservationBatch);
    await nextTurn();
    const usage = reservations < config.batchRows ? await retireUsageBatch(storage, config.exportDir, usageBatch) : 0;
    outcome.reservations += reservations;
    outcome.usage += usage;
    if (reservations < config.batchRows && usage < config.batchRows) break;
    await nextTurn();
  }
  return outcome;
}

/** The gateway's retention job: a pass every `everySeconds` on the instance holding the lease; a pass never overlaps the one before. */
export interface RetentionJobDeps {
  now: () => number;
  logger: Logger;
  afterExport?: () => void;
}

export function retentionJob(storage: Pick<Storage, 'db'>, config: RetentionConfig, deps: RetentionJobDeps): BackgroundJob {
  let warnedNoCheckpoint = false;
  const pass = (holder: string) =>
    runRetentionPass(storage, config, { now: deps.now(), holder, afterExport: deps.afterExport })
      .then((o) => {
        const removed = { reservations: o.reservations, usage: o.usage, exportDir: config.exportDir };
        if (o.reservations || o.usage) deps.logger.info(removed, 'retention removed old rows');
        if (!o.ran && !warnedNoCheckpoint) {
          warnedNoCheckpoint = true;
          deps.logger.info(
            'retention waits for a ledger-check checkpoint (or another instance runs it): the checkpoint job takes them, or run tollgate admin ledger-check',
          );
        }
      })
      .catch((err) => deps.logger.warn({ err }, 'retention pass failed; the next pass retries (an exported batch is exported again, dedupe by id)'));
  return leasedJob(storage.db, { name: 'retention', lease: LEASE, everyMs: config.everySeconds * 1000, pass });
}
