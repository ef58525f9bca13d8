import { PostgresAdapter, sql, type Kysely, type Transaction } from 'kysely';
import type { Database, LedgerCheckpointTable } from '../../storage/schema.ts';
import { DAY_MS } from '../days.ts';

export type Checkpoint = LedgerCheckpointTable;

export const USAGE_SUMS = [
  'request_count',
  'prompt_tokens',
  'completion_tokens',
  'reasoning_tokens',
  'cached_tokens',
  'charged_usdc',
  'provider_cost_usdc',
] as const;

/**
 * A day is closed once it ended this long ago: a write unit that took its id before midnight has
 * long committed by then, so no row below a boundary can still appear (on PostgreSQL ids are
 * handed out before commit).
 */
export const CLOSE_MARGIN_MS = 15 * 60_000;

/** The checkpoint a check starts from: the latest one, or null before the first. */
export async function latestCheckpoint(db: Kysely<Database>): Promise<Checkpoint | null> {
  const row = await db.selectFrom('ledger_checkpoints').selectAll().orderBy('day', 'desc').limit(1).executeTakeFirst();
  if (!row) return null;
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)])) as unknown as Checkpoint;
}

/** The last UTC day (days since 1970-01-01) that has closed at `now`. */
export const lastClosedDay = (now: number): number => Math.floor((now - CLOSE_MARGIN_MS) / DAY_MS) - 1;

type Table = 'ledger_entries' | 'request_usage' | 'reservations';

/**
 * The highest id of `table` that belongs before the end of the day: the last row below the first
 * one created at or after `end`. Reads only rows after `after` (the previous checkpoint's
 * boundary), in id order, so the cost follows new activity.
 *
 * The last row seen, not "the first after, minus one": on PostgreSQL an id is handed out before
 * its write commits, so the ids just below the first row of a new day can belong to writes still
 * in flight (the first requests after a quiet night, racing the morning's check). A boundary there
 * would cover rows its sums never saw. Every row below a committed row of the closed day took its
 * id before that day ended, and has long committed once the day has closed (CLOSE_MARGIN_MS).
 */
async function boundary(db: Kysely<Database>, table: Table, after: number, end: number): Promise<number> {
  const first = await sql<{ id: number | null }>`select min(id) as id from ${sql.table(table)} where id > ${after} and created_at >= ${end}`.execute(db);
  const firstAfter = first.rows[0]?.id;
  const below = firstAfter != null ? sql`and id < ${Number(firstAfter)}` : sql``;
  const last = await sql<{ id: number | null }>`select max(id) as id from ${sql.table(table)} where id > ${after} ${below}`.execute(db);
  return last.rows[0]?.id != null ? Number(last.rows[0].id) : after;
}

/** The three boundaries of a checkpoint at the end of `day`, after `prev`'s. */
export async function boundaries(db: Kysely<Database>, prev: Checkpoint | null, day: number) {
  const end = (day + 1) * DAY_MS;
  return {
    last_entry_id: await boundary(db, 'ledger_entries', prev?.last_entry_id ?? 0, end),
    last_usage_id: await boundary(db, 'request_usage', prev?.last_usage_id ?? 0, end),
    last_reservation_id: await boundary(db, 'reservations', prev?.last_reservation_id ?? 0, end),
  };
}

/**
 * Stores the checkpoint at the end of `day`: `prev`'s sums plus the rows between its boundaries
 * and the new ones. Called only after a check that passed, so what it freezes was proven.
 *
 * The per-wallet and per-key sums are kept once, for the latest checkpoint, and each new one adds
 * to them: a second check that started from the same `prev` (two instances, an operator's hand
 * beside the cron, clocks either side of a day's close) would add the same rows again. So the
 * write re-reads the latest checkpoint under a lock and stores nothing (null) when it is no
 * longer `prev`.
 */
export async function writeCheckpoint(db: Kysely<Database>, prev: Checkpoint | null, day: number, now: number): Promise<Checkpoint | null> {
  const b = await boundaries(db, prev, day);
  const entryRange = (q: Kysely<Database>) =>
    q
      .selectFrom('ledger_entries')
      .where('id', '>', prev?.last_entry_id ?? 0)
      .where('id', '<=', b.last_entry_id);
  const totals = await entryRange(db)
    .select([
      sql<number>`count(*)`.as('entries'),
      sql<number>`coalesce(sum(case when amount_usdc > 0 then amount_usdc else 0 end), 0)`.as('credits'),
      sql<number>`coalesce(sum(case when amount_usdc < 0 then -amount_usdc else 0 end), 0)`.as('charges'),
    ])
    .executeTakeFirstOrThrow();
  const wallets = await entryRange(db)
    .select(['wallet', sql<number>`sum(amount_usdc)`.as('sum')])
    .groupBy('wallet')
    .execute();
  const usage = await db
    .selectFrom('request_usage')
    .where('id', '>', prev?.last_usage_id ?? 0)
    .where('id', '<=', b.last_usage_id)
    .select(['api_key_id', sql<number>`count(*)`.as('request_count'), ...USAGE_SUMS.slice(1).map((c) => sql<number>`sum(${sql.ref(c)})`.as(c))])
    .groupBy('api_key_id')
    .execute();
  const checkpoint: Checkpoint = {
    day,
    ...b,
    entries: (prev?.entries ?? 0) + Number(totals.entries),
    credits_usdc: (prev?.credits_usdc ?? 0) + Number(totals.credits),
    charges_usdc: (prev?.charges_usdc ?? 0) + Number(totals.charges),
    created_at: now,
  };
  return db.transaction().execute(async (trx) => {
    // PostgreSQL: writers of checkpoints queue here (the mode conflicts with itself, not with
    // readers). SQLite: the transaction's first write waits for, or fails against, another writer.
    if (trx.getExecutor().adapter instanceof PostgresAdapter) await sql`lock table ledger_checkpoints in share row exclusive mode`.execute(trx);
    if ((await latestCheckpoint(trx))?.day !== prev?.day) return null;
    if (!prev) {
      // A first checkpoint (or one after the table was emptied by hand) starts its sums from nothing.
      await trx.deleteFrom('ledger_checkpoint_wallets').execute();
      await trx.deleteFrom('ledger_checkpoint_usage').execute();
    }
    for (const w of wallets) await addWalletSum(trx, w.wallet, Number(w.sum));
    for (const u of usage) await addUsageSums(trx, u as unknown as Record<string, number>);
    await trx.insertInto('ledger_checkpoints').values(checkpoint).execute();
    return checkpoint;
  });
}

async function addWalletSum(trx: Transaction<Database>, wallet: string, sum: number): Promise<void> {
  await trx
    .insertInto('ledger_checkpoint_wallets')
    .values({ wallet, ledger_usdc: sum })
    .onConflict((oc) => oc.column('wallet').doUpdateSet({ ledger_usdc: sql`ledger_checkpoint_wallets.ledger_usdc + excluded.ledger_usdc` }))
    .execute();
}

async function addUsageSums(trx: Transaction<Database>, sums: Record<string, number>): Promise<void> {
  const values = Object.fromEntries(USAGE_SUMS.map((c) => [c, Number(sums[c])]));
  const added = Object.fromEntries(USAGE_SUMS.map((c) => [c, sql`ledger_checkpoint_usage.${sql.ref(c)} + excluded.${sql.ref(c)}`]));
  await trx
    .insertInto('ledger_checkpoint_usage')
    .values({ api_key_id: Number(sums.api_key_id), ...values } as never)
    .onConflict((oc) => oc.column('api_key_id').doUpdateSet(added as never))
    .execute();
}
