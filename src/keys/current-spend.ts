import type { Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import type { KeyRow } from './api-keys.ts';
import { bucketOf, periodResetsAt } from '../ledger/spend-periods.ts';

export interface CurrentSpend {
  /** Charged in the key's current period (its limit's period; all time for a key without a limit). */
  spentUsdc: number;
  /** Reserved by its requests still running in that period. */
  reservedUsdc: number;
  /** When the period's count starts again at 0 (epoch ms); null for a total. */
  resetsAt: number | null;
}

/** Each key's spend in its current period, by key id: one read of key_spend for all of them. */
export async function currentSpend(db: Kysely<Database>, keys: KeyRow[], now = Date.now()): Promise<Map<number, CurrentSpend>> {
  const bucketOfKey = new Map(keys.map((k) => [k.id, bucketOf(k.spend_limit_period ?? 'total', now)]));
  const rows = keys.length
    ? await db
        .selectFrom('key_spend')
        .select(['api_key_id', 'period', 'spent_usdc', 'locked_usdc'])
        .where(
          'api_key_id',
          'in',
          keys.map((k) => k.id),
        )
        .where('period', 'in', [...new Set(bucketOfKey.values())])
        .execute()
    : [];
  const out = new Map<number, CurrentSpend>();
  for (const k of keys) {
    const row = rows.find((r) => Number(r.api_key_id) === k.id && r.period === bucketOfKey.get(k.id));
    out.set(k.id, {
      spentUsdc: Number(row?.spent_usdc ?? 0),
      reservedUsdc: Number(row?.locked_usdc ?? 0),
      resetsAt: periodResetsAt(k.spend_limit_period ?? 'total', now),
    });
  }
  return out;
}
