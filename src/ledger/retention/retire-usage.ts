import { sql, type Transaction } from 'kysely';
import type { Storage } from '../../storage/database.ts';
import type { Database } from '../../storage/schema.ts';
import { usageDay } from '../days.ts';
import { USAGE_SUMS } from '../checkpoints/checkpoint-store.ts';
import { exportUsageRows } from './usage-export.ts';

export interface RetentionBatch {
  /** Removable rows are older than this (epoch ms). */
  cutoff: number;
  /** The highest id a ledger-check checkpoint covers: nothing above it is removed. */
  coveredId: number;
  rows: number;
  /** Test only: throws after the export, before the delete (src/fail-points.ts). */
  afterExport?: () => void | Promise<void>;
}

/**
 * One batch of request_usage rows leaving the hot table: the oldest rows below the cutoff that a
 * checkpoint covers and whose reservation is already gone (so key_spend's audit, which reads a
 * reservation's usage row, never loses one), exported durably, then deleted in one short
 * transaction that adds exactly the deleted rows (DELETE … RETURNING) to retired_usage. Two
 * runners at once may export a batch twice, never count it twice. Returns the rows deleted.
 */
export async function retireUsageBatch(storage: Pick<Storage, 'db'>, exportDir: string, b: RetentionBatch): Promise<number> {
  const rows = await storage.db
    .selectFrom('request_usage as u')
    .selectAll('u')
    .where('u.id', '<=', b.coveredId)
    .where('u.created_at', '<', b.cutoff)
    .where(({ not, exists, selectFrom }) => not(exists(selectFrom('reservations as r').select('r.id').whereRef('r.request_id', '=', 'u.request_id'))))
    .orderBy('u.id')
    .limit(b.rows)
    .execute();
  if (rows.length === 0) return 0;
  await exportUsageRows(
    exportDir,
    rows.map((r) => ({ ...r, id: Number(r.id) })),
  );
  await b.afterExport?.();
  const ids = rows.map((r) => r.id);
  return storage.db.transaction().execute(async (trx) => {
    const deleted = await trx
      .deleteFrom('request_usage')
      .where('id', 'in', ids)
      .returning(['wallet', 'api_key_id', 'created_at', 'prompt_tokens', 'completion_tokens', 'reasoning_tokens', 'cached_tokens'])
      .returning(['charged_usdc', 'provider_cost_usdc'])
      .execute();
    await addRetired(trx, deleted as unknown as Record<string, string | number>[]);
    return deleted.length;
  });
}

/** Adds deleted usage rows to retired_usage, one upsert per (wallet, UTC day, key) cell. */
async function addRetired(trx: Transaction<Database>, deleted: Record<string, string | number>[]): Promise<void> {
  const cells = new Map<string, Record<string, number | string>>();
  for (const r of deleted) {
    const day = usageDay(Number(r.created_at));
    const id = `${r.wallet} ${day} ${r.api_key_id}`;
    const cell = cells.get(id) ?? { wallet: r.wallet!, day, api_key_id: Number(r.api_key_id), ...Object.fromEntries(USAGE_SUMS.map((c) => [c, 0])) };
    cell.request_count = Number(cell.request_count) + 1;
    for (const c of USAGE_SUMS.slice(1)) cell[c] = Number(cell[c]) + Number(r[c]);
    cells.set(id, cell);
  }
  const added = Object.fromEntries(USAGE_SUMS.map((c) => [c, sql`retired_usage.${sql.ref(c)} + excluded.${sql.ref(c)}`]));
  for (const cell of cells.values()) {
    await trx
      .insertInto('retired_usage')
      .values(cell as never)
      .onConflict((oc) => oc.columns(['wallet', 'day', 'api_key_id']).doUpdateSet(added as never))
      .execute();
  }
}
