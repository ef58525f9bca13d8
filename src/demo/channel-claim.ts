import { randomUUID } from 'node:crypto';
import type { RunningServer } from '../main.ts';
import { CLAIM_LEASE, runClaimPass, type ClaimPassOutcome } from '../payments/channels/claims/claim-pass.ts';
import { namedLease } from '../retention/job-lease.ts';

/**
 * One pass of the gateway's channel claimer now, every channel with unclaimed charges whatever the
 * threshold and age, then the settle: what `tollgate admin channels --claim` runs, here with the
 * demo gateway's own facilitator and chain readers. The demo's claimer waits its longest period,
 * so it does not hold the lease; the pass gives the lease back so the claimer can run later.
 */
export async function claimChannelsNow(gateway: RunningServer): Promise<ClaimPassOutcome> {
  const { storage, topup, config } = gateway.services;
  if (!topup) throw new Error('the demo gateway has no top-up facilitator to claim with');
  const lease = namedLease(storage.db, CLAIM_LEASE);
  const holder = `demo-${randomUUID()}`;
  const deps = {
    db: storage.db,
    lease,
    facilitator: topup.facilitator,
    clientFor: (network: string) => topup.clientFor(network),
    config: config.payPerRequest.batchSettlement,
    logger: { info: () => {}, warn: () => {} },
    now: Date.now,
  };
  try {
    return await runClaimPass(deps, { holder, force: true });
  } finally {
    await lease.release(holder);
  }
}
