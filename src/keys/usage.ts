import { sql, type Kysely } from 'kysely';
import type { Database } from '../storage/schema.ts';

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

/** Totals per key of the wallet, every key included (revoked ones too, and keys never used). */
export async function usageByKey(db: Kysely<Database>, wallet: string): Promise<KeyUsage[]> {
  const rows = await db
    .selectFrom('api_keys as k')
    .leftJoin('request_usage as u', 'u.api_key_id', 'k.id')
    .select([
      'k.id',
      'k.label',
      'k.created_at',
      'k.revoked_at',
      sql<number>`count(u.id)`.as('request_count'),
      sql<number>`coalesce(sum(u.prompt_tokens), 0)`.as('prompt'),
      sql<number>`coalesce(sum(u.completion_tokens), 0)`.as('completion'),
      sql<number>`coalesce(sum(u.charged_usdc), 0)`.as('charged'),
      sql<number>`coalesce(sum(u.provider_cost_usdc), 0)`.as('cost'),
    ])
    .where('k.wallet', '=', wallet)
    .groupBy(['k.id', 'k.label', 'k.created_at', 'k.revoked_at'])
    .orderBy('k.id')
    .execute();
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
