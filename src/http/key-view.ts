import { toIso, type KeyRow } from '../keys/api-keys.ts';
import type { CurrentSpend } from '../keys/current-spend.ts';
import type { KeyLimits } from '../keys/limits.ts';

/** A key's restrictions as the API shows them (money in micro-USDC, times in ISO 8601). */
export function limitsView(l: KeyLimits) {
  return {
    spend_limit_usdc: l.spend_limit_usdc,
    spend_limit_period: l.spend_limit_period,
    models: l.allowed_models,
    expires_at: toIso(l.expires_at),
  };
}

/** A key as the list and PATCH show it: never its secret or hash. */
export function keyView(r: KeyRow, spend: CurrentSpend) {
  return {
    id: r.id,
    label: r.label,
    created_at: toIso(r.created_at),
    revoked_at: toIso(r.revoked_at),
    last_used_at: toIso(r.last_used_at),
    last4: r.last4,
    ...limitsView(r),
    spend_usdc: spend.spentUsdc,
    reserved_usdc: spend.reservedUsdc,
    spend_resets_at: toIso(spend.resetsAt),
  };
}
