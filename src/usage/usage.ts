import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';
import { getBalance, type Balance } from '../ledger/balances.ts';

export interface KeyUsage {
  api_key_id: number;
  label: string;
  created_at: number;
  revoked_at: number | null;
  request_count: number;
  total_prompt_tokens: number;
  total_completion_tokens: number;
  total_charged_usdc: number;
  total_provider_cost_usdc: number;
}

/**
 * The usage read: the wallet's keys (by the api_keys_wallet index) and each key's running totals
 * (one primary-key lookup per key). It never touches request_usage, so its cost is O(keys) however
 * many requests the wallet made: any key holder can call it, and on SQLite a slow read holds the
 * only connection for every other wallet. Exported so a test can check the plan of this exact query.
 */
export function usageByKeyQuery(db: Kysely<Database>, wallet: string) {
  return db
    .selectFrom('api_keys as k')
    .leftJoin('usage_totals as t', 't.api_key_id', 'k.id')
    .select([
      'k.id',
      'k.label',
      'k.created_at',
      'k.revoked_at',
      sql<number>`coalesce(t.request_count, 0)`.as('request_count'),
      sql<number>`coalesce(t.prompt_tokens, 0)`.as('prompt'),
      sql<number>`coalesce(t.completion_tokens, 0)`.as('completion'),
      sql<number>`coalesce(t.charged_usdc, 0)`.as('charged'),
      sql<number>`coalesce(t.provider_cost_usdc, 0)`.as('cost'),
    ])
    .where('k.wallet', '=', wallet)
    .orderBy('k.id');
}

/** Totals per key of the wallet, every key included (revoked ones too, and keys never used). */
export async function usageByKey(db: Kysely<Database>, wallet: string): Promise<KeyUsage[]> {
  const rows = await usageByKeyQuery(db, wallet).execute();
  return rows.map((r) => ({
    api_key_id: Number(r.id),
    label: r.label,
    created_at: Number(r.created_at),
    revoked_at: r.revoked_at === null ? null : Number(r.revoked_at),
    request_count: Number(r.request_count),
    total_prompt_tokens: Number(r.prompt),
    total_completion_tokens: Number(r.completion),
    total_charged_usdc: Number(r.charged),
    total_provider_cost_usdc: Number(r.cost),
  }));
}

/** GET /v1/usage/:wallet's figures: the wallet's balance and its keys' totals, read side by side. */
export async function walletUsage(db: Kysely<Database>, wallet: string): Promise<{ balance: Balance; keys: KeyUsage[] }> {
  const [balance, keys] = await Promise.all([getBalance(db, wallet), usageByKey(db, wallet)]);
  return { balance, keys };
}
