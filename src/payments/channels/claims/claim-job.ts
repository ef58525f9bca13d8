import { randomUUID } from 'node:crypto';
import type { Metrics } from '../../../metrics/metrics.ts';
import { runClaimPass, type ClaimDeps, type ClaimMetrics } from './claim-pass.ts';

/** The claimer's counters in the gateway's metrics. */
export function claimMetrics(m: Metrics): ClaimMetrics {
  return {
    claims: () => m.channelClaims.inc(),
    claimed: (usdc) => m.channelClaimedUsdc.inc(usdc),
    failed: () => m.channelClaimFailures.inc(),
    settled: () => m.channelSettles.inc(),
    withdrawalSeen: () => m.channelWithdrawalsSeen.inc(),
  };
}

/**
 * The channel claimer (payPerRequest.batchSettlement): a pass every claimIntervalSeconds on the
 * instance holding its lease (the others' passes return at once), never two passes at a time on
 * one instance; a clean stop waits for the pass under way and gives the lease up.
 */
/** A BackgroundJob (background-jobs.ts), by shape: that module imports the payment code. */
export interface ClaimJob {
  readonly name: string;
  start(): void;
  stop(): Promise<void>;
}

export function channelClaimJob(deps: ClaimDeps): ClaimJob {
  const holder = randomUUID();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | null = null;
  const pass = () => {
    running ??= runClaimPass(deps, { holder })
      .catch((err: unknown) => deps.logger.warn({ err: (err as Error).message }, 'channel claim pass failed; the next pass retries'))
      .finally(() => (running = null));
  };
  return {
    name: 'channel claims',
    start() {
      timer = setInterval(pass, deps.config.claimIntervalSeconds * 1000);
      timer.unref();
    },
    async stop() {
      clearInterval(timer);
      await running;
      await deps.lease.release(holder).catch(() => undefined);
    },
  };
}
