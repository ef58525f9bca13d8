import type { SpendPeriod } from '../ledger/spend-periods.ts';

/**
 * What an owner can restrict a key to: a spend limit per period, a list of models, an
 * expiry. NULL is "no restriction". The limit is enforced in the reservation (src/ledger/key-spend-limit.ts),
 * the model list and the expiry before it (src/http/auth/key-checks.ts).
 */
export interface KeyLimits {
  spend_limit_usdc: number | null;
  /** Set exactly when spend_limit_usdc is. */
  spend_limit_period: SpendPeriod | null;
  /** Full model ids (`provider/name`). */
  allowed_models: string[] | null;
  expires_at: number | null;
}

export const NO_LIMITS: KeyLimits = { spend_limit_usdc: null, spend_limit_period: null, allowed_models: null, expires_at: null };
