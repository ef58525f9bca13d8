import { randomUUID } from 'node:crypto';
import type { BackgroundJob } from '../../../background-jobs.ts';
import type { Metrics } from '../../../metrics/metrics.ts';
import { releaseLease } from '../../../retention/job-lease.ts';
import { CLAIM_LEASE, runClaimPass, type ClaimDeps, type ClaimMetrics } from './claim-pass.ts';

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
export function channelClaimJob(deps: ClaimDeps): BackgroundJob {
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
      await releaseLease(deps.db, CLAIM_LEASE, holder).catch(() => undefined);
    },
  };
}
