import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { sql } from 'kysely';
import { generateKey, insertKey } from '../src/keys/api-keys.ts';
import { writeCheckpoint } from '../src/ledger/checkpoints/checkpoint-store.ts';
import { readBoundary } from '../src/ledger/checkpoints/boundary.ts';
import { runLedgerCheck } from '../src/ledger/checkpoints/run-check.ts';
import { DAY_MS } from '../src/ledger/days.ts';
import { runRetentionPass } from '../src/retention/retention-job.ts';
import { runCheckpointPass } from '../src/retention/checkpoint-job.ts';
import { openStorage, type Storage } from '../src/storage/database.ts';
import { migrateToLatest } from '../src/storage/migrate.ts';
import { backfillUsageTotals } from '../src/storage/migrations/004-usage-totals.ts';
import { keySpendAtUpgrade } from '../src/storage/migrations/006-key-limits.ts';
import { backfillUsageDaily } from '../src/storage/migrations/007-dashboard.ts';
import { fundPayers, type Payer, reserveAndFinish } from './ledger.ts';
import { median } from './median.ts';

/**
 * Issue 38 §4 as the benchmark measures it, on SQLite with 100 wallets (the engine of the issue's
 * 1.2-million-request run):
 * - bytes kept per request in the hot tables after the retention window: requests driven through
 *   the ledger's own reserve and finish, checkpointed by ledger-check, retired by the retention
 *   pass, then VACUUM; the hot tables' and their indexes' pages (dbstat) over the requests;
 * - the operator's ledger-check with the gateway's checkpoint job on: older history bulk-inserted
 *   as well-formed rows (a request's charge entry, reservation and usage row, with the wallets'
 *   balances, usage totals, daily totals and key spend made to agree) and checkpointed; then a
 *   period's requests (ledger.checkpointEverySeconds × 1,000) through the ledger's own operations
 *   and one pass of the job, timed with its CPU; then the tail an operator's check can find after
 *   the latest checkpoint at 1,000 req/s, (period + the pass's own duration) × 1,000 requests, and
 *   the operator's check over it, timed over three sizes of history, the sizes in turn, five rounds
 *   (so drift on the machine falls on every size alike). A day at 1,000 req/s on top of 10 M older
 *   puts 96.4 M requests under the latest checkpoint: projected by the rule in `projectDay`
 *   (bench/README.md says why it is not driven).
 */
export interface StorageCase {
  engine: 'SQLite';
  wallets: number;
  retained: { requests: number; hotBytes: number; bytesPerRequest: number; tables: Record<string, number>; retentionMs: number };
  /** The operator's check over the tail after the job's checkpoint, at each history size (smallest first): the median ms of its runs. */
  checks: Array<{ olderRequests: number; newRequests: number; ms: number; runs?: number[] }>;
  /** The job's pass over one period's requests, on the largest history. */
  job: JobPass;
  projection: DayProjection;
}

export interface JobPass {
  periodSeconds: number;
  /** Requests the pass checked and checkpointed: one period at 1,000 req/s. */
  requests: number;
  ms: number;
  cpuMs: number;
  cpuPerRequestUs: number;
}

export interface StorageSizes {
  /** Requests driven and then retired, for the bytes kept per request. */
  retained: number;
  /**
   * The histories, bulk-inserted, smallest first: how the check's time moves with them is what
   * history costs it. Three, not two: two medians 31 ms apart decided the projection on their own
   * (bench/README.md "The incremental ledger-check's slope").
   */
  older: number[];
  /** The job's period in seconds: a period's requests at 1,000 req/s are driven before the pass. */
  periodSeconds: number;
}

export const FULL_SIZES: StorageSizes = { retained: 20_000, older: [100_000, 400_000, 1_000_000], periodSeconds: 60 };
export const QUICK_SIZES: StorageSizes = { retained: 5_000, older: [10_000, 40_000, 100_000], periodSeconds: 60 };
/**
 * `--older 100000,400000,1000000` (bench/storage-retention.ts): the history sizes, refused unless
 * there are at least two (a line needs two points) and each is a whole number of requests of at
 * least 1,000.
 */
export function parseHistorySizes(text: string): number[] {
  const sizes = text.split(',').map((part) => (part.trim() === '' ? Number.NaN : Number(part)));
  if (sizes.length < 2 || sizes.some((n) => !Number.isInteger(n) || n < 1000)) {
    throw new Error(`--older ${text}: give at least two history sizes, whole numbers of requests of at least 1,000, e.g. --older 100000,400000,1000000`);
  }
  return sizes;
}

/** Timed rounds of the operator's check; each round times every history once. */
const CHECK_ROUNDS = 5;

const WALLETS = 100;
/** The issue's day: 1,000 req/s for 24 hours, on top of 10 million older requests. */
export const RATE = 1_000;
export const DAY_REQUESTS = 86_400_000;
export const OLDER_REQUESTS = 10_000_000;

export async function measureStorage(dir: string, sizes: StorageSizes, log: (text: string) => void): Promise<StorageCase> {
  log(`storage: ${sizes.retained.toLocaleString('en-US')} requests through the ledger, checkpointed, retired, vacuumed`);
  const retained = await withDatabase(join(dir, 'retained.db'), async (s) =>
    measureRetained(s, await fundPayers(s, WALLETS, 'benchmark funding'), sizes.retained, join(dir, 'archive')),
  );
  const opened: Storage[] = [];
  const histories: History[] = [];
  let job: JobPass | null = null;
  try {
    for (const older of [...sizes.older].sort((a, b) => a - b)) {
      log(`ledger-check: ${older.toLocaleString('en-US')} older requests bulk-inserted and checkpointed, a period's requests, the job's pass, the tail`);
      const s = await openMigrated(join(dir, `history-${older}.db`));
      opened.push(s);
      const payers = await olderHistory(s, older);
      const period = sizes.periodSeconds * RATE;
      await drive(s, payers, period);
      job = await timeJobPass(s, sizes.periodSeconds, period);
      const tail = Math.round((sizes.periodSeconds * 1000 + job.ms) * (RATE / 1000));
      await drive(s, payers, tail);
      histories.push({ storage: s, olderRequests: older + period, newRequests: tail });
    }
    if (!job) throw new Error('no job pass measured');
    log(`ledger-check: the operator's check over each history's tail, ${CHECK_ROUNDS} rounds, the histories in turn`);
    const checks = await timeIncrementalChecks(histories);
    return { engine: 'SQLite', wallets: WALLETS, retained, checks, job, projection: projectDay(checks) };
  } finally {
    for (const s of opened) await s.close();
  }
}

/** One history's database, with the requests under the job's checkpoint and the tail after it. */
interface History {
  storage: Storage;
  olderRequests: number;
  newRequests: number;
}

/** One pass of the gateway's checkpoint job over a period's requests: wall time and the process's CPU time. */
async function timeJobPass(s: Storage, periodSeconds: number, requests: number): Promise<JobPass> {
  await sql`pragma wal_checkpoint(truncate)`.execute(s.db);
  const cpu = process.cpuUsage();
  const started = performance.now();
  const pass = await runCheckpointPass(s, { now: Date.now(), holder: 'bench', periodMs: periodSeconds * 1000 });
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  if (!pass.ran || !pass.check.ok || !pass.check.stored) throw new Error('the job pass did not store a checkpoint');
  const cpuMs = (used.user + used.system) / 1000;
  return { periodSeconds, requests, ms, cpuMs, cpuPerRequestUs: (cpuMs * 1000) / requests };
}

async function withDatabase<T>(file: string, work: (s: Storage) => Promise<T>): Promise<T> {
  const s = await openMigrated(file);
  try {
    return await work(s);
  } finally {
    await s.close();
  }
}

async function openMigrated(file: string): Promise<Storage> {
  const s = openStorage(`sqlite:${file}`);
  try {
    await migrateToLatest(s);
    return s;
  } catch (error) {
    await s.close();
    throw error;
  }
}

/** `n` requests through the ledger's own reserve and finish, 32 in flight, the wallets in turn. */
async function drive(s: Storage, payers: Payer[], n: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) await reserveAndFinish(s, payers[next++ % payers.length]!, 'openai/gpt-4o-mini');
  };
  await Promise.all(Array.from({ length: 32 }, worker));
}

/** The tables that grow with every request; each one's indexes are counted with it. */
const HOT_TABLES = ['ledger_entries', 'request_usage', 'reservations'];

/** Bytes of the pages each hot table and its indexes use (dbstat), and of the whole file. */
export async function hotTableBytes(s: Storage): Promise<{ hot: number; tables: Record<string, number> }> {
  const rows = await sql<{ tbl: string; bytes: number }>`
    select m.tbl_name as tbl, sum(d.pgsize) as bytes from dbstat d join sqlite_master m on m.name = d.name
    where m.tbl_name in (${sql.join(HOT_TABLES)}) group by m.tbl_name`.execute(s.db);
  const tables = Object.fromEntries(rows.rows.map((r) => [r.tbl, Number(r.bytes)]));
  return { hot: Object.values(tables).reduce((a, b) => a + b, 0), tables };
}

async function measureRetained(s: Storage, payers: Payer[], requests: number, exportDir: string): Promise<StorageCase['retained']> {
  await drive(s, payers, requests);
  // Everything driven is past the windows 100 days on; the check's checkpoint is what lets it leave.
  const later = Date.now() + 100 * DAY_MS;
  const check = await runLedgerCheck(s.db, { full: false, now: later });
  if (!check.ok) throw new Error(`ledger check failed: ${check.problems.slice(0, 5).join('; ')}`);
  const config = { enabled: true, usageDays: 90, reservationDays: 7, exportDir, batchRows: 500, everySeconds: 60 };
  const started = performance.now();
  for (;;) {
    const pass = await runRetentionPass(s, config, { now: later, holder: 'bench', budgetMs: 60_000 });
    if (!pass.ran) throw new Error('the retention pass did not run');
    if (pass.usage === 0 && pass.reservations === 0) break;
  }
  const retentionMs = performance.now() - started;
  await sql`vacuum`.execute(s.db);
  const { hot, tables } = await hotTableBytes(s);
  return { requests, hotBytes: hot, bytesPerRequest: hot / requests, tables, retentionMs };
}

/**
 * `count` older requests as rows (no HTTP, no ledger operation: a million a few seconds), spread
 * over the ten days before today, with what the ledger keeps beside them made to agree (balances,
 * usage totals, daily totals, key spend), then a checkpoint over them, as the job leaves it. The rows are the ones a request writes:
 * its charge entry, its settled reservation and its usage row, ids 36 characters long like the
 * gateway's. Returns the funded wallets with a key each.
 */
async function olderHistory(s: Storage, count: number): Promise<Payer[]> {
  const now = Date.now();
  const start = (Math.floor(now / DAY_MS) - 10) * DAY_MS;
  const step = Math.max(1, Math.floor((10 * DAY_MS - 1) / (count + 1)));
  await sql`create temp table bench_payers (n integer primary key, wallet text not null, key_id integer not null)`.execute(s.db);
  const payers: Payer[] = [];
  for (let i = 0; i < WALLETS; i++) {
    const wallet = `0x${randomBytes(20).toString('hex')}`;
    await s.db.insertInto('wallets').values({ address: wallet, balance_usdc: 0, locked_usdc: 0, created_at: start, updated_at: start }).execute();
    const key = await insertKey(s.db, wallet, generateKey(randomBytes(32)), 'bench', undefined, start);
    await sql`insert into bench_payers (n, wallet, key_id) values (${i}, ${wallet}, ${key.id})`.execute(s.db);
    payers.push({ wallet, key });
  }
  await sql`insert into ledger_entries (wallet, kind, amount_usdc, reference, note, created_at)
    select wallet, 'adjustment', 1000000000000, null, 'benchmark funding', ${start} from bench_payers order by n`.execute(s.db);
  const id = (i: string) => sql`printf('00000000-0000-7000-8000-%012d', ${sql.raw(i)})`;
  const CHUNK = 250_000;
  for (let from = 0; from < count; from += CHUNK) {
    const to = Math.min(count, from + CHUNK);
    const rows = sql`with recursive n(i) as (select ${from} union all select i + 1 from n where i + 1 < ${to})
      select n.i as i, p.wallet as wallet, p.key_id as key_id, ${start + step} + n.i * ${step} as at from n join bench_payers p on p.n = n.i % ${WALLETS}`;
    await s.db.transaction().execute(async (trx) => {
      await sql`insert into ledger_entries (wallet, kind, amount_usdc, reference, note, created_at)
        select wallet, 'charge', -40, ${id('i')}, null, at from (${rows})`.execute(trx);
      await sql`insert into reservations (wallet, api_key_id, request_id, amount_usdc, status, charged_usdc, lease_expires_at, created_at, finished_at)
        select wallet, key_id, ${id('i')}, 100, 'settled', 40, at + 60000, at, at from (${rows})`.execute(trx);
      await sql`insert into request_usage (request_id, api_key_id, wallet, model, provider, deployment, prompt_tokens, completion_tokens, reasoning_tokens,
          cached_tokens, charged_usdc, provider_cost_usdc, status, latency_ms, estimated, created_at)
        select ${id('i')}, key_id, wallet, 'openai/gpt-4o-mini', 'openai', 'openai', 10, 20, 0, 0, 40, 30, 'success', 1, 0, at from (${rows})`.execute(trx);
    });
  }
  await s.db.transaction().execute(async (trx) => {
    await sql`update wallets set balance_usdc = (select sum(amount_usdc) from ledger_entries e where e.wallet = wallets.address)`.execute(trx);
    await backfillUsageTotals(trx);
    await backfillUsageDaily(trx);
    await trx.deleteFrom('key_spend').execute();
    for (const row of await keySpendAtUpgrade(trx)) await trx.insertInto('key_spend').values(row).execute();
  });
  await writeCheckpoint(s.db, null, await readBoundary(s.db, () => now), now);
  // The history must pass the check it is the base of, or the timings below would time a failure.
  const base = await runLedgerCheck(s.db, { full: false, now: now + 1 });
  if (!base.ok) throw new Error(`the bulk-inserted history fails ledger-check: ${base.problems.slice(0, 5).join('; ')}`);
  return payers;
}

/**
 * `tollgate admin ledger-check` from the job's checkpoint (checking only: every run reads the same
 * tail), each history once per round, in turn, CHECK_ROUNDS rounds; the median per history, in ms.
 * Interleaved so that a slow minute of the machine lands on every history, not on one of them. The
 * WAL is checkpointed first, as the gateway's checkpointer keeps it: the bulk insert leaves it
 * hundreds of megabytes long, and reading through that would be timed instead.
 */
async function timeIncrementalChecks(histories: History[]): Promise<StorageCase['checks']> {
  for (const h of histories) await sql`pragma wal_checkpoint(truncate)`.execute(h.storage.db);
  const runs = histories.map((): number[] => []);
  for (let round = 0; round < CHECK_ROUNDS; round++) {
    for (const [i, h] of histories.entries()) {
      const started = performance.now();
      const check = await runLedgerCheck(h.storage.db, { full: false, store: false });
      runs[i]!.push(performance.now() - started);
      if (!check.ok) throw new Error(`ledger check failed: ${check.problems.slice(0, 5).join('; ')}`);
      if (!check.from) throw new Error('the timed check was not the incremental one (no checkpoint)');
    }
  }
  return histories.map((h, i) => ({ olderRequests: h.olderRequests, newRequests: h.newRequests, ms: median(runs[i]!), runs: runs[i]! }));
}

export interface DayProjection {
  /** ms per million older requests: the same tail over the larger history against the smaller. */
  perMillionOlderMs: number;
  /** Requests under the latest checkpoint after the day: the day's and the 10 M older, less the tail. */
  olderAtDay: number;
  /** The operator's check after a day at 1,000 req/s on 10 M older, by the rule below. */
  dayMs: number;
  rule: string;
}

/**
 * The rule: the operator's check reads the tail after the job's latest checkpoint, measured at its
 * real size, and a term linear in the history under it:
 * t(day) = t(tail, largest history) + slope_older × (86.4 M + 10 M − tail − largest history).
 * The slope is the least-squares line through every history's median, each first scaled to the
 * largest history's tail (the tails differ by the job pass's time, about 1%, and the check's time
 * follows its tail); below zero, noise, it counts as zero. Linear is the pessimistic shape: an
 * index seek grows with the logarithm of the history, not with it.
 */
export function projectDay(checks: StorageCase['checks']): DayProjection {
  if (checks.length < 2) throw new Error('the projection needs the check timed over at least two histories');
  const large = checks[checks.length - 1]!;
  const points = checks.map((c) => ({ x: c.olderRequests, y: (c.ms * large.newRequests) / c.newRequests }));
  const perOlder = Math.max(0, leastSquaresSlope(points));
  const olderAtDay = DAY_REQUESTS + OLDER_REQUESTS - large.newRequests;
  const dayMs = large.ms + perOlder * (olderAtDay - large.olderRequests);
  const m = (n: number) => `${(n / 1e6).toLocaleString('en-US', { maximumFractionDigits: 2 })} M`;
  const rule =
    `${large.ms.toFixed(0)} ms measured over the tail of ${large.newRequests.toLocaleString('en-US')} new on ${m(large.olderRequests)} older, ` +
    `+ ${(perOlder * 1e6).toFixed(1)} ms per million older × ${m(olderAtDay - large.olderRequests)} ` +
    `(the slope through ${checks.length} histories: ${checks.map((c) => `${c.ms.toFixed(0)} ms on ${m(c.olderRequests)}`).join(', ')})`;
  return { perMillionOlderMs: perOlder * 1e6, olderAtDay, dayMs, rule };
}

function leastSquaresSlope(points: Array<{ x: number; y: number }>): number {
  const meanX = points.reduce((a, p) => a + p.x, 0) / points.length;
  const meanY = points.reduce((a, p) => a + p.y, 0) / points.length;
  const covariance = points.reduce((a, p) => a + (p.x - meanX) * (p.y - meanY), 0);
  const variance = points.reduce((a, p) => a + (p.x - meanX) ** 2, 0);
  return variance === 0 ? 0 : covariance / variance;
}
