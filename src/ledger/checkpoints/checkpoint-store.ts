import { PostgresAdapter, sql, type Kysely, type Transaction } from 'kysely';
import type { Database, LedgerCheckpointTable } from '../../storage/schema.ts';
import { DAY_MS, usageDay } from '../days.ts';
import type { Boundary } from './boundary.ts';
import { sumsPerWallet, usageSumsPerKey } from './range-sums.ts';

export type Checkpoint = LedgerCheckpointTable;

import { USAGE_SUMS } from './usage-sums.ts';

export { USAGE_SUMS };

/**
 * A checkpoint keeps the usage_daily cells of the days a row after it may still count towards:
 * from the day this long before its boundary. A usage row's created_at is its instance's clock at
 * the settle, and an id is drawn a moment later, so a row just after a boundary read after
 * midnight can belong to the day before; an hour covers any sane clock skew between instances.
 */
const CELL_SLACK_MS = 60 * 60_000;

/** The checkpoint a check starts from: the latest one, or null before the first. */
export async function latestCheckpoint(db: Kysely<Database>): Promise<Checkpoint | null> {
  const row = await db.selectFrom('ledger_checkpoints').selectAll().orderBy('at', 'desc').limit(1).executeTakeFirst();
  if (!row) return null;
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)])) as unknown as Checkpoint;
}

/** The first day whose cells a checkpoint at `at` after `prev` keeps: never before prev's, whose cells it adds to. */
export const cellsFrom = (prev: Checkpoint | null, at: number): number => Math.max(prev?.cells_from ?? 0, usageDay(at - CELL_SLACK_MS));

const usageRange = (db: Kysely<Database>, prev: Checkpoint | null, b: Boundary) =>
  db
    .selectFrom('request_usage')
    .where('id', '>', prev?.last_usage_id ?? 0)
    .where('id', '<=', b.last_usage_id);

/** What a checkpoint adds to its predecessor's: the rows between `prev`'s boundaries and `b`'s, summed. */
export interface CheckpointSums {
  checkpoint: Checkpoint;
  wallets: Array<{ wallet: string; sum: number }>;
  usage: Array<Record<string, number>>;
  cells: Array<{ wallet: string; api_key_id: number; day: number; request_count: number; charged_usdc: number }>;
}

/**
 * The checkpoint at boundary `b`: `prev`'s sums plus the rows between its boundaries and `b`'s,
 * read from `db` (the check's own snapshot, so what it freezes is what the check proved).
 */
export async function checkpointSums(db: Kysely<Database>, prev: Checkpoint | null, b: Boundary, now: number): Promise<CheckpointSums> {
  const entryRange = db
    .selectFrom('ledger_entries')
    .where('id', '>', prev?.last_entry_id ?? 0)
    .where('id', '<=', b.last_entry_id);
  const totals = await entryRange
    .select([
      sql<number>`count(*)`.as('entries'),
      sql<number>`coalesce(sum(case when amount_usdc > 0 then amount_usdc else 0 end), 0)`.as('credits'),
      sql<number>`coalesce(sum(case when amount_usdc < 0 then -amount_usdc else 0 end), 0)`.as('charges'),
    ])
    .executeTakeFirstOrThrow();
  const wallets = await sumsPerWallet(entryRange).execute();
  const usage = await usageSumsPerKey(usageRange(db, prev, b)).execute();
  const from = cellsFrom(prev, b.at);
  const day = sql<number>`created_at / ${sql.lit(DAY_MS)}`;
  const cells = await usageRange(db, prev, b)
    .where('created_at', '>=', from * DAY_MS)
    .select(['wallet', 'api_key_id', day.as('day'), sql<number>`count(*)`.as('request_count'), sql<number>`sum(charged_usdc)`.as('charged_usdc')])
    .groupBy(['wallet', 'api_key_id', day])
    .execute();
  const checkpoint: Checkpoint = {
    at: b.at,
    cells_from: from,
    last_entry_id: b.last_entry_id,
    last_usage_id: b.last_usage_id,
    last_reservation_id: b.last_reservation_id,
    entries: (prev?.entries ?? 0) + Number(totals.entries),
    credits_usdc: (prev?.credits_usdc ?? 0) + Number(totals.credits),
    charges_usdc: (prev?.charges_usdc ?? 0) + Number(totals.charges),
    created_at: now,
  };
  return {
    checkpoint,
    wallets: wallets.map((w) => ({ wallet: w.wallet, sum: Number(w.sum) })),
    usage: usage as unknown as Array<Record<string, number>>,
    cells: cells.map((c) => ({
      ...c,
      api_key_id: Number(c.api_key_id),
      day: Number(c.day),
      request_count: Number(c.request_count),
      charged_usdc: Number(c.charged_usdc),
    })),
  };
}

/** Checkpoint rows are kept this long (only the latest is read; the older ones show the job's history to an operator). */
const KEEP_CHECKPOINTS_MS = 30 * DAY_MS;

/**
 * Stores a checkpoint after `prev`, in one transaction: nothing half-written survives a crash.
 * Called only after a check that passed, with its sums already read (checkpointSums), so the
 * transaction holds the write lock only for these few upserts: on SQLite the ledger's own writes
 * wait for it.
 *
 * The per-wallet, per-key and per-day sums are kept once, for the latest checkpoint, and each new
 * one adds to them: a second check that started from the same `prev` (the gateway's job and an
 * operator's hand, two instances) would add the same rows again. So the write re-reads the latest
 * checkpoint under a lock and stores nothing (null) when it is no longer `prev`.
 * `beforeCommit` (test only) runs inside the transaction, after the sums were added.
 */
export async function storeCheckpoint(
  db: Kysely<Database>,
  prev: Checkpoint | null,
  s: CheckpointSums,
  beforeCommit?: () => void | Promise<void>,
): Promise<Checkpoint | null> {
  return db.transaction().execute(async (trx) => {
    // The first statement takes the lock writers of checkpoints queue on, before anything is read.
    // PostgreSQL: a table lock whose mode conflicts with itself, not with readers. SQLite: a write
    // (the pruning of old checkpoints), which waits for the write lock (busy_timeout) and reads from
    // a fresh snapshot once it has it. A read first would pin an older snapshot, and on a connection
    // beside the gateway's writer (the checkpoint worker's) the first write after it would fail at
    // once whenever that writer had committed since (SQLITE_BUSY_SNAPSHOT), pass after pass.
    if (trx.getExecutor().adapter instanceof PostgresAdapter) await sql`lock table ledger_checkpoints in share row exclusive mode`.execute(trx);
    // Never `prev` itself: after a month with no checkpoint it is older than the window, and still the one this one adds to.
    await trx
      .deleteFrom('ledger_checkpoints')
      .where('at', '<', Math.min(s.checkpoint.at - KEEP_CHECKPOINTS_MS, prev?.at ?? Number.POSITIVE_INFINITY))
      .execute();
    if ((await latestCheckpoint(trx))?.at !== prev?.at) return null;
    if (!prev) {
      // A first checkpoint (or one after the table was emptied by hand) starts its sums from nothing.
      await trx.deleteFrom('ledger_checkpoint_wallets').execute();
      await trx.deleteFrom('ledger_checkpoint_usage').execute();
      await trx.deleteFrom('ledger_checkpoint_days').execute();
    }
    for (const w of s.wallets) await addWalletSum(trx, w.wallet, w.sum);
    for (const u of s.usage) await addUsageSums(trx, u);
    await trx.deleteFrom('ledger_checkpoint_days').where('day', '<', s.checkpoint.cells_from).execute();
    for (const c of s.cells) await addDayCell(trx, c);
    await beforeCommit?.();
    await trx.insertInto('ledger_checkpoints').values(s.checkpoint).execute();
    return s.checkpoint;
  });
}

/** The checkpoint at `b` after `prev`, read and stored on one database (the bench's and tests' shortcut). */
export async function writeCheckpoint(db: Kysely<Database>, prev: Checkpoint | null, b: Boundary, now: number): Promise<Checkpoint | null> {
  return storeCheckpoint(db, prev, await checkpointSums(db, prev, b, now));
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

async function addDayCell(trx: Transaction<Database>, c: CheckpointSums['cells'][number]): Promise<void> {
  await trx
    .insertInto('ledger_checkpoint_days')
    .values(c)
    .onConflict((oc) =>
      oc.columns(['wallet', 'api_key_id', 'day']).doUpdateSet({
        request_count: sql`ledger_checkpoint_days.request_count + excluded.request_count`,
        charged_usdc: sql`ledger_checkpoint_days.charged_usdc + excluded.charged_usdc`,
      }),
    )
    .execute();
}
