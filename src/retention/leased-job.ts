import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { BackgroundJob } from '../background-jobs.ts';
import type { Database } from '../storage/schema.ts';
import { releaseLease } from './job-lease.ts';

export interface LeasedJobSpec {
  name: string;
  /** The lease's name in `job_leases`: the pass takes it (holdLease) with the holder it is given. */
  lease: string;
  everyMs: number;
  /** One pass, as `holder`; it handles its own errors (a rejection would reach stop()). */
  pass: (holder: string) => Promise<unknown>;
  /** Run at stop before waiting for the pass in flight: ends it rather than wait for its whole length. */
  interrupt?: () => Promise<void>;
}

/**
 * A background job that runs a pass every `everyMs` on the instance holding its lease: a pass
 * never overlaps the one before (a slow one makes the next tick skip), and a clean stop waits for
 * the pass in flight and gives the lease up, so another instance need not wait for it to run out.
 */
export function leasedJob(db: Kysely<Database>, spec: LeasedJobSpec): BackgroundJob {
  const holder = randomUUID();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | null = null;
  const pass = () => {
    running ??= spec.pass(holder).finally(() => (running = null));
  };
  return {
    name: spec.name,
    start() {
      timer = setInterval(pass, spec.everyMs);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      await spec.interrupt?.();
      await running;
      await releaseLease(db, spec.lease, holder).catch(() => undefined);
    },
  };
}
