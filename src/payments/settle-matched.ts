import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import type { MatchedPayment } from './match.ts';
import type { TopupService } from './service.ts';
import type { SettleDeps, TopupOutcome } from './settle-topup.ts';

/** What settling a matched payment needs from the running gateway. */
export interface SettleMatchedDeps {
  db: Kysely<Database>;
  topup: TopupService;
  logger: SettleDeps['logger'];
  settleWaitMs: number;
  /** Counts each outcome (tollgate_topups_total). */
  countOutcome: (kind: TopupOutcome['kind']) => void;
}

/** What a paid request checks on the way (SettleDeps says when each runs); a throw refuses it. */
export type SettleHooks = Pick<SettleDeps, 'admitSigned' | 'admitVerified'>;

/**
 * The one settle path of every paid endpoint (top-ups, pay-per-request chat): admits the payer
 * (contract wallets only on their chain), then records, verifies, settles and credits the payment
 * exactly once (settle-topup.ts). Callers branch on the outcome. `admitSigned` runs once the
 * payer is known to have signed, before anything is recorded; `admitVerified` between verify and
 * send (a throw from either refuses with nothing sent).
 */
export async function settleMatched(deps: SettleMatchedDeps, matched: MatchedPayment, hooks: SettleHooks = {}): Promise<TopupOutcome> {
  const { topup } = deps;
  // The settle path (x402's EVM scheme, viem) is loaded by the first payment, not at start-up.
  const { settleTopup } = await import('./settle-topup.ts');
  await topup.admitPayer(matched);
  const outcome = await settleTopup(
    {
      db: deps.db,
      facilitator: topup.facilitator,
      client: topup.clientFor(matched.identity.network)!,
      logger: deps.logger,
      settleWaitMs: deps.settleWaitMs,
      now: Date.now,
      beforeBroadcast: topup.beforeBroadcast,
      ...hooks,
    },
    matched,
  );
  deps.countOutcome(outcome.kind);
  return outcome;
}
