import type { KeyLimits } from './limits.ts';
import type { SpendPeriod } from '../ledger/spend-periods.ts';

/**
 * Whether a change of limits lets a key do more: a dashboard session may only tighten,
 * loosening needs a proof signed for it. Decided field by field on the limits before and after the
 * change, so a PATCH that tightens one limit and loosens another is a loosening.
 */

// For the same amount, a total cap allows the least (it never resets), a daily one the most.
const PERIOD_SPAN: Readonly<Record<SpendPeriod, number>> = { total: 0, month: 1, day: 2 };

/** The API names of the limits `next` loosens compared with `current`; empty when it only tightens. */
export function loosenedLimits(current: KeyLimits, next: KeyLimits): string[] {
  const loosened: string[] = [];
  if (capLoosened(current, next)) loosened.push('spend_limit_usdc');
  if (modelsLoosened(current.allowed_models, next.allowed_models)) loosened.push('models');
  if (expiryLoosened(current.expires_at, next.expires_at)) loosened.push('expires_at');
  return loosened;
}

/** Removing a cap, raising it, or moving it to a period that resets more often. */
function capLoosened(current: KeyLimits, next: KeyLimits): boolean {
  if (current.spend_limit_usdc === null) return false;
  if (next.spend_limit_usdc === null) return true;
  if (next.spend_limit_usdc > current.spend_limit_usdc) return true;
  return PERIOD_SPAN[next.spend_limit_period ?? 'total'] > PERIOD_SPAN[current.spend_limit_period ?? 'total'];
}

/** Removing the list, or adding any model to it. */
function modelsLoosened(current: string[] | null, next: string[] | null): boolean {
  if (current === null) return false;
  if (next === null) return true;
  return next.some((m) => !current.includes(m));
}

/** Removing the expiry, or moving it later. */
function expiryLoosened(current: number | null, next: number | null): boolean {
  if (current === null) return false;
  return next === null || next > current;
}
