import type { Logger } from 'pino';
import type { InflightRequest } from './metered/deps.ts';
import { sweepExpiredReservations } from './ledger/operations/expire.ts';
import { extendLeases } from './ledger/reservations.ts';
import type { DurableSettler } from './ledger/spool/durable-settle.ts';
import type { SettleSpool } from './ledger/spool/spool-file.ts';
import { pruneSessions } from './sessions/store.ts';
import { pruneExpiredResponses } from './stored-responses/store.ts';
import { pruneNonces } from './siwe/nonce-store.ts';
import { prunePaymentIdentifiers } from './payments/pay-per-request/identifier-store.ts';
import type { Storage } from './storage/database.ts';

/** How often settles spooled during a database outage are tried again. */
const SPOOL_REPLAY_MS = 5_000;

/**
 * Work a running gateway does on its own, beside the requests. Every job is started in the list's
 * order and stopped in reverse by one close (startJobs), so what a job relies on (the database's
 * checkpointer, a settle spool applied before the sweeper runs) is there for its whole life.
 */
export interface BackgroundJob {
  readonly name: string;
  start(): void | Promise<void>;
  stop(): void | Promise<void>;
}

export interface RunningJobs {
  /** Stops every started job, last started first; each is stopped even if one before it failed. */
  stop(): Promise<void>;
}

/** Starts `jobs` in order; if one fails to start, those already started are stopped again. */
export async function startJobs(jobs: readonly BackgroundJob[]): Promise<RunningJobs> {
  const started: BackgroundJob[] = [];
  const stop = async () => {
    let failure: unknown;
    for (const job of started.splice(0).reverse()) {
      try {
        await job.stop();
      } catch (err) {
        failure ??= err;
      }
    }
    if (failure) throw failure;
  };
  try {
    for (const job of jobs) {
      await job.start();
      started.push(job);
    }
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
  return { stop };
}

/** A job that runs `run` every `ms` (first after `ms`); unref'd, so it never holds the process open. */
export function every(name: string, ms: number, run: () => void, opts: { atStart?: boolean } = {}): BackgroundJob {
  let timer: NodeJS.Timeout | undefined;
  return {
    name,
    start() {
      if (opts.atStart) run();
      timer = setInterval(run, ms);
      timer.unref();
    },
    stop: () => clearInterval(timer),
  };
}

export interface GatewayJobSources {
  storage: Storage;
  settler: DurableSettler;
  spool: SettleSpool;
  inflight: ReadonlySet<InflightRequest>;
  leaseMs: number;
  /** The gateway's clock (tests move it). */
  now: () => number;
  /** The top-up service, when offers are configured: the payment reconciler's pass and period. */
  topup: { reconcile(): Promise<unknown>; reconcileEveryMs: number } | null;
  logger: Logger;
  /** The retention job (src/retention/), when `retention.enabled`. */
  retention?: BackgroundJob | null;
  /** The ledger-check checkpoint job (src/retention/checkpoint-job.ts), unless `ledger.checkpointEverySeconds` is 0. */
  ledgerCheckpoints?: BackgroundJob | null;
  /** The batch-settlement channel claimer (src/payments/channels/claims/), when payPerRequest.batchSettlement is on. */
  channelClaims?: BackgroundJob | null;
}

/** The gateway's background jobs, in the order they start (they stop in reverse). */
export function gatewayJobs(s: GatewayJobSources): BackgroundJob[] {
  const { storage, settler, logger } = s;
  const jobs: BackgroundJob[] = [];
  // SQLite only: WAL checkpoints on a worker thread (storage/checkpointer.ts), first in and last
  // out, so every other job's writes are checkpointed.
  if (storage.checkpoints) jobs.push({ name: 'sqlite checkpointer', ...storage.checkpoints });
  jobs.push(
    every('SIWE, session and payment-identifier pruning', 60_000, () => {
      pruneNonces(storage.db).catch((err) => logger.warn({ err }, 'pruning used SIWE nonces failed'));
      pruneSessions(storage.db).catch((err) => logger.warn({ err }, 'pruning ended dashboard sessions failed'));
      prunePaymentIdentifiers(storage.db).catch((err) => logger.warn({ err }, 'pruning old payment identifiers failed'));
    }),
    // Expired stored responses are never read (every read checks expires_at); this only frees their
    // space: batches of 500 until one comes back short or 2 s have passed, so it keeps up with a
    // gateway storing more than a batch a minute.
    every('stored response expiry', 60_000, () => {
      pruneExpiredResponses(storage.db, s.now())
        .then((n) => n && logger.info({ pruned: n }, 'removed expired stored responses'))
        .catch((err) => logger.warn({ err }, 'pruning expired stored responses failed'));
    }),
    spoolReplay(settler, s.spool, logger),
    // A crashed instance leaves reservations pending; once their lease runs out they are voided, so
    // no crash can lock a wallet's money for good.
    every(
      'reservation sweeper',
      30_000,
      () => {
        sweepExpiredReservations(storage.db)
          .then((n) => n && logger.warn({ voided: n }, 'voided reservations whose lease expired'))
          .catch((err) => logger.warn({ err }, 'sweeping expired reservations failed'));
      },
      { atStart: true },
    ),
    // One timer renews the leases of every request this instance is running, in one statement a
    // round, instead of a timer per request.
    every('lease renewal', s.leaseMs / 3, () => {
      const ids = [...s.inflight].map((bill) => bill.requestId);
      // In slices, so a busy instance stays within the engines' limits on bound parameters.
      for (let i = 0; i < ids.length; i += 1000) {
        const slice = ids.slice(i, i + 1000);
        extendLeases(storage, slice, s.leaseMs).catch((err) => logger.warn({ err, requests: slice.length }, 'renewing reservation leases failed'));
      }
    }),
  );
  if (s.ledgerCheckpoints) jobs.push(s.ledgerCheckpoints);
  if (s.retention) jobs.push(s.retention);
  if (s.channelClaims) jobs.push(s.channelClaims);
  // Stopped first: the stop waits for a pass under way, while the database is still open.
  if (s.topup) jobs.push(paymentReconciler(s.topup, logger));
  return jobs;
}

/**
 * Settles spooled before a crash or an outage are applied before anything else runs (and before
 * the sweeper, next in the list, could release their reservations), then every few seconds; at
 * the end once more, before the spool is closed.
 */
function spoolReplay(settler: DurableSettler, spool: SettleSpool, logger: Logger): BackgroundJob {
  const periodic = every('settle spool replay', SPOOL_REPLAY_MS, () => {
    settler.replay().catch((err) => logger.error({ err }, 'applying the settle spool failed'));
  });
  return {
    name: periodic.name,
    async start() {
      await settler.replay().catch((err) => logger.error({ err }, 'applying the settle spool at start-up failed; it is tried again every few seconds'));
      periodic.start();
    },
    async stop() {
      periodic.stop();
      await settler.replay().catch(() => undefined);
      spool.close();
    },
  };
}

/**
 * At start-up (a crash may have left a payment settled on chain but not yet credited, or recorded
 * but never sent), then every `reconcileEveryMs`; a pass never overlaps the one before, and the
 * stop waits for a pass under way.
 */
function paymentReconciler(topup: { reconcile(): Promise<unknown>; reconcileEveryMs: number }, logger: Logger): BackgroundJob {
  let running: Promise<unknown> | null = null;
  const pass = () => {
    running ??= topup
      .reconcile()
      .catch((err) => logger.warn({ err: (err as Error).message }, 'payment reconciler pass failed'))
      .finally(() => (running = null));
  };
  const periodic = every('payment reconciler', topup.reconcileEveryMs, pass, { atStart: true });
  return {
    name: periodic.name,
    start: periodic.start,
    async stop() {
      periodic.stop();
      await running;
    },
  };
}
