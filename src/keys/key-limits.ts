import type { Kysely } from 'kysely';
import type { Catalog } from '../providers/catalog.ts';
import type { Database } from '../storage/schema.ts';
import { loosenedLimits } from './limit-direction.ts';
import type { KeyLimits } from './limits.ts';
import { SPEND_PERIODS, type SpendPeriod } from '../ledger/spend-periods.ts';

/** A change to a key's limits: a field left undefined stays as it is, null clears it. */
export type LimitChanges = { [K in keyof KeyLimits]?: KeyLimits[K] };

/** The fields as the API and the CLI take them. */
export interface LimitInput {
  spend_limit_usdc?: unknown;
  spend_limit_period?: unknown;
  models?: unknown;
  expires_at?: unknown;
}

export const LIMIT_FIELDS = ['spend_limit_usdc', 'spend_limit_period', 'models', 'expires_at'] as const;
const MAX_MODELS = 100;
// ISO 8601 as Date.parse reads it unambiguously: a date (UTC midnight), or a date and time with Z or an offset.
/** The forms expires_at takes (the CLI's --expires checks the same). */
export const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;

export function limitColumns(l: KeyLimits) {
  return {
    spend_limit_usdc: l.spend_limit_usdc,
    spend_limit_period: l.spend_limit_period,
    allowed_models: l.allowed_models === null ? null : JSON.stringify(l.allowed_models),
    expires_at: l.expires_at,
  };
}

export function limitsFromColumns(r: {
  spend_limit_usdc: number | null;
  spend_limit_period: string | null;
  allowed_models: string | null;
  expires_at: number | null;
}): KeyLimits {
  return {
    spend_limit_usdc: r.spend_limit_usdc === null ? null : Number(r.spend_limit_usdc),
    spend_limit_period: r.spend_limit_usdc === null ? null : ((r.spend_limit_period ?? 'total') as SpendPeriod),
    allowed_models: r.allowed_models === null ? null : (JSON.parse(r.allowed_models) as string[]),
    expires_at: r.expires_at === null ? null : Number(r.expires_at),
  };
}

export type Checked<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * Validates the limit fields of a create or a PATCH. Every problem is named in one message; model
 * names are resolved against the catalog (full ids, or a bare name offered by one provider) and
 * kept as full ids. `now` decides whether an expiry is in the future.
 */
export function parseLimitInput(input: LimitInput, catalog: Catalog, now: number): Checked<LimitChanges> {
  const problems: string[] = [];
  const changes: LimitChanges = {};
  const limit = input.spend_limit_usdc;
  if (limit !== undefined) {
    if (limit === null) changes.spend_limit_usdc = null;
    else if (typeof limit === 'number' && Number.isSafeInteger(limit) && limit > 0) changes.spend_limit_usdc = limit;
    else problems.push('spend_limit_usdc must be a positive whole number of micro-USDC (1 USD = 1000000), or null to remove the limit');
  }
  const period = input.spend_limit_period;
  if (period !== undefined) {
    if (period === null) changes.spend_limit_period = null;
    else if (typeof period === 'string' && (SPEND_PERIODS as readonly string[]).includes(period)) changes.spend_limit_period = period as SpendPeriod;
    else problems.push(`spend_limit_period must be one of ${SPEND_PERIODS.join(', ')} (UTC)`);
  }
  const models = input.models;
  if (models !== undefined) {
    if (models === null) changes.allowed_models = null;
    else if (
      !Array.isArray(models) ||
      models.length === 0 ||
      models.length > MAX_MODELS ||
      !models.every((m) => typeof m === 'string' && m.length > 0 && m.length <= 200)
    ) {
      problems.push(`models must be a list of 1 to ${MAX_MODELS} model ids (see GET /v1/models), or null to allow every model`);
    } else {
      const resolved = resolveModelIds(catalog, models as string[]);
      if (resolved.ok) changes.allowed_models = resolved.value;
      else problems.push(resolved.reason);
    }
  }
  const expires = input.expires_at;
  if (expires !== undefined) {
    if (expires === null) changes.expires_at = null;
    else if (typeof expires !== 'string' || !ISO_8601.test(expires) || Number.isNaN(Date.parse(expires))) {
      problems.push('expires_at must be an ISO 8601 time such as 2030-01-31T00:00:00Z (a date alone is UTC midnight), or null for no expiry');
    } else if (Date.parse(expires) <= now) problems.push(`expires_at ${expires} is not in the future`);
    else changes.expires_at = Date.parse(expires);
  }
  return problems.length ? { ok: false, reason: problems.join('; ') } : { ok: true, value: changes };
}

function resolveModelIds(catalog: Catalog, names: string[]): Checked<string[]> {
  const ids = new Set<string>();
  const unknown: string[] = [];
  const ambiguous: string[] = [];
  for (const name of names) {
    const exact = catalog.byId.get(name);
    const byName = catalog.byName.get(name) ?? [];
    if (exact) ids.add(exact.id);
    else if (byName.length === 1) ids.add(byName[0]!.id);
    else if (byName.length > 1) ambiguous.push(`"${name.slice(0, 200)}" (one of ${byName.map((m) => m.id).join(', ')})`);
    else unknown.push(`"${name.slice(0, 200)}"`);
  }
  const problems: string[] = [];
  if (unknown.length) problems.push(`models: unknown model${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; GET /v1/models lists the available ones`);
  if (ambiguous.length) problems.push(`models: ${ambiguous.join(', ')} is offered by several providers; use the full id`);
  return problems.length ? { ok: false, reason: problems.join('; ') } : { ok: true, value: [...ids] };
}

/** The limits after a change; a period needs a limit, and removing the limit removes its period. */
export function applyLimitChanges(current: KeyLimits, changes: LimitChanges): Checked<KeyLimits> {
  const next: KeyLimits = { ...current, ...changes };
  if (changes.spend_limit_usdc === null) next.spend_limit_period = null;
  else if (next.spend_limit_usdc !== null) next.spend_limit_period = next.spend_limit_period ?? 'total';
  else if (changes.spend_limit_period) return { ok: false, reason: 'spend_limit_period needs spend_limit_usdc: send both' };
  return { ok: true, value: next };
}

export type UpdateLimitsOutcome =
  | { ok: true; limits: KeyLimits }
  | { ok: false; reason: 'not_found' | 'revoked' | 'contended' }
  | { ok: false; reason: 'invalid'; message: string }
  | { ok: false; reason: 'loosens'; fields: string[] };

const CONCURRENT_CHANGE_ATTEMPTS = 5;

/**
 * Changes a key's limits. `wallet` scopes it to the owner (another wallet's key is not_found, like
 * a missing one); the operator's CLI passes null. Without `mayLoosen` (a dashboard session, a proof
 * not signed for loosening) a change that lets the key do more is refused as 'loosens'. The
 * decision is written only if the key's limits are still the ones it was made on (compare and set):
 * otherwise a "tighten" decided on a stale read could loosen a limit the owner lowered meanwhile.
 * A lost race is decided again on the new limits, a few times, then refused as 'contended'.
 * A new limit applies to the next reservation on every instance at once (it is read there); a
 * model list or expiry within the key cache's TTL.
 */
export async function updateKeyLimits(
  db: Kysely<Database>,
  id: number,
  wallet: string | null,
  changes: LimitChanges,
  mayLoosen: boolean,
): Promise<UpdateLimitsOutcome> {
  for (let attempt = 0; attempt < CONCURRENT_CHANGE_ATTEMPTS; attempt++) {
    const outcome = await db.transaction().execute(async (trx): Promise<UpdateLimitsOutcome | 'changed_meanwhile'> => {
      let query = trx
        .selectFrom('api_keys')
        .select(['revoked_at', 'spend_limit_usdc', 'spend_limit_period', 'allowed_models', 'expires_at'])
        .where('id', '=', id);
      if (wallet !== null) query = query.where('wallet', '=', wallet);
      const row = await query.executeTakeFirst();
      if (!row) return { ok: false, reason: 'not_found' };
      if (row.revoked_at !== null) return { ok: false, reason: 'revoked' };
      const current = limitsFromColumns(row);
      const next = applyLimitChanges(current, changes);
      if (!next.ok) return { ok: false, reason: 'invalid', message: next.reason };
      if (!mayLoosen) {
        const loosened = loosenedLimits(current, next.value);
        if (loosened.length) return { ok: false, reason: 'loosens', fields: loosened };
      }
      const written = await trx
        .updateTable('api_keys')
        .set(limitColumns(next.value))
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .where('spend_limit_usdc', row.spend_limit_usdc === null ? 'is' : '=', row.spend_limit_usdc)
        .where('spend_limit_period', row.spend_limit_period === null ? 'is' : '=', row.spend_limit_period)
        .where('allowed_models', row.allowed_models === null ? 'is' : '=', row.allowed_models)
        .where('expires_at', row.expires_at === null ? 'is' : '=', row.expires_at)
        .executeTakeFirst();
      return Number(written.numUpdatedRows) === 1 ? { ok: true, limits: next.value } : 'changed_meanwhile';
    });
    if (outcome !== 'changed_meanwhile') return outcome;
  }
  return { ok: false, reason: 'contended' };
}
