import type Sqlite from 'better-sqlite3';
import { BatchCounters } from './batch-counters.ts';
import { GroupCommit, type BatchOutcome, type Queued } from './group-commit.ts';
import { LoopBudget } from './loop-budget.ts';
import type { UnitTx } from './write-units.ts';

/** How many units one SQLite transaction takes at most, so one commit never stalls the process long. */
const MAX_UNITS_PER_COMMIT = 256;

/**
 * How long one batch should hold the event loop, and the fewest units it takes all the same (so a
 * slow machine still shares its commits). 4 ms: well under the reference proxy's time to first
 * token at 1,000 streams/s (about 10 ms), and at saturation (64 requests in flight, 40-80 µs a
 * unit) still batches of 50 to 100, whose commits cost a few percent more than one of 256.
 */
const LOOP_BUDGET_MS = 4;
const MIN_UNITS_PER_COMMIT = 16;

/**
 * SQLite group commit (see group-commit.ts). In WAL mode a committed transaction is in the WAL
 * file, so a process crash loses none; a failed SQLite transaction never committed, so a failed
 * batch is always run again unit by unit.
 *
 * What it saves: one BEGIN/COMMIT and one WAL append of each touched page per batch instead of per
 * unit, Kysely's transaction machinery (mutex, promise chains, query building) per unit, and the
 * counter statements' repeats: those on the same rows are added up and written once per batch.
 *
 * The batch holds Kysely's single SQLite connection (`hold`) while it runs, so no Kysely query
 * ever interleaves with it.
 */
export class SqliteGroupCommit extends GroupCommit {
  private readonly tx: UnitTx;
  private readonly budget = new LoopBudget(LOOP_BUDGET_MS, MIN_UNITS_PER_COMMIT, MAX_UNITS_PER_COMMIT);
  /** The batch's counter statements, added up and written before its COMMIT (batch-counters.ts). */
  private readonly counters = new BatchCounters();
  // `prepare` is the caching one installed by openSqlite: each text is compiled once.
  private readonly runNow = (sql: string, params: unknown[]): number => this.sqlite.prepare(sql).run(params).changes;

  constructor(
    private readonly sqlite: Sqlite.Database,
    private readonly holdConnection: (work: () => Promise<void>) => Promise<void>,
  ) {
    super(MAX_UNITS_PER_COMMIT);
    this.tx = {
      run: (sql, params) => {
        this.counters.before(sql, this.runNow);
        return Promise.resolve(this.runNow(sql, params));
      },
      get: <T>(sql: string, params: unknown[]) => {
        this.counters.before(sql, this.runNow);
        // get(), not all(): a unit's reads want one row, and all() builds an array for it.
        return Promise.resolve(this.sqlite.prepare(sql).get(params) as T | undefined);
      },
      addToCounters: (sql, params, sumAt) => this.counters.add(sql, params, sumAt),
    };
  }

  protected hold(work: () => Promise<void>): Promise<void> {
    return this.holdConnection(work);
  }

  /** Statements run on the event loop: a backlog commits in slices of about LOOP_BUDGET_MS (loop-budget.ts). */
  protected override batchLimit(): number {
    return this.budget.limit();
  }

  protected async transaction(units: Queued[]): Promise<BatchOutcome> {
    const values: unknown[] = [];
    const started = performance.now();
    try {
      this.exec('BEGIN IMMEDIATE');
    } catch (err) {
      // The write lock is held elsewhere (SQLITE_BUSY after busy_timeout) and nothing ran: every
      // unit gets that error now. Run alone, each would wait the whole busy_timeout again, on the
      // event loop, which a batch of N units would hold for N more timeouts.
      return { ok: false, err, retryAlone: false };
    }
    try {
      this.counters.discard();
      for (const { unit } of units) values.push(await unit(this.tx));
      this.counters.writeAll(this.runNow);
      this.exec('COMMIT');
      this.budget.ran(units.length, performance.now() - started);
      return { ok: true, values };
    } catch (err) {
      this.counters.discard();
      if (this.sqlite.inTransaction) this.exec('ROLLBACK');
      return { ok: false, err, retryAlone: true };
    }
  }

  /** BEGIN, COMMIT and ROLLBACK: once per batch, so not worth a cached statement each. */
  private exec(sql: string): void {
    this.sqlite.exec(sql);
  }
}
