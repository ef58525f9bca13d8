import { CompiledQuery, sql, type Kysely } from 'kysely';
import type Libsql from 'libsql';
import type { Database } from './schema.ts';

/**
 * The statements of one unit of work, inside the transaction that commits it. SQL is
 * written once, with `?` placeholders, for both engines. Used for the ledger's hot path, where
 * Kysely's builder and per-transaction machinery cost more than the statements themselves.
 */
export interface UnitTx {
  /** Runs a statement; returns how many rows it changed. */
  run(sql: string, params: unknown[]): Promise<number>;
  /** Runs a query (or a statement with RETURNING) that yields at most one row; returns it. */
  get<T>(sql: string, params: unknown[]): Promise<T | undefined>;
}

/**
 * All or nothing: a unit either commits every statement it ran, or none of them (it threw). A unit
 * may await only its `tx` calls: on SQLite it runs while other units of its batch wait.
 */
export type WriteUnit<T> = (tx: UnitTx) => Promise<T>;

/** Runs write units; each promise settles only once the unit is committed (or rolled back). */
export type UnitRunner = <T>(unit: WriteUnit<T>) => Promise<T>;

/** PostgreSQL: each unit is its own transaction, its statements sent precompiled (no query builder). */
export function postgresUnits(db: Kysely<Database>): UnitRunner {
  const texts = new Map<string, string>();
  const numbered = (sql: string) => {
    let text = texts.get(sql);
    if (text === undefined) {
      let i = 0;
      // Our unit SQL has no string literals holding '?', so every '?' is a placeholder.
      text = sql.replace(/\?/g, () => `$${++i}`);
      texts.set(sql, text);
    }
    return text;
  };
  return (unit) =>
    db.transaction().execute((trx) =>
      unit({
        run: async (sql, params) => Number((await trx.executeQuery(CompiledQuery.raw(numbered(sql), params))).numAffectedRows ?? 0),
        get: async <T>(sql: string, params: unknown[]) => (await trx.executeQuery<T>(CompiledQuery.raw(numbered(sql), params))).rows[0],
      }),
    );
}

/**
 * Runs one unit in a Kysely transaction, on either engine: for a writer off the hot path that holds
 * only a Kysely handle (the sweeper), so it runs the ledger's unit SQL with the locking it always
 * had (its own transaction, outside the group commit). Each '?' becomes a Kysely parameter, which
 * the dialect numbers its own way.
 */
export function kyselyUnit<T>(db: Kysely<Database>, unit: WriteUnit<T>): Promise<T> {
  return db.transaction().execute((trx) => {
    const query = <R>(text: string, params: unknown[]) => sql<R>(kyselyFragments(text), ...params).execute(trx);
    return unit({
      run: async (text, params) => Number((await query(text, params)).numAffectedRows ?? 0),
      get: async <R>(text: string, params: unknown[]) => (await query<R>(text, params)).rows[0],
    });
  });
}

const fragments = new Map<string, TemplateStringsArray>();
// As above: unit SQL holds no string literal with a '?', so every '?' is a placeholder. The text
// between them is what Kysely's sql tag takes as its template strings.
function kyselyFragments(text: string): TemplateStringsArray {
  let parts = fragments.get(text);
  if (parts === undefined) {
    const split = text.split('?');
    parts = Object.assign(split, { raw: [...split] }) as unknown as TemplateStringsArray;
    fragments.set(text, parts);
  }
  return parts;
}

/** How many units one SQLite transaction takes at most, so one commit never stalls the process long. */
const MAX_UNITS_PER_COMMIT = 256;

interface Queued {
  // A unit may run twice (see flush), so it must not act outside its tx.
  unit: WriteUnit<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/**
 * SQLite group commit. Units submitted in the same turn of the event loop are written in one
 * transaction; if any unit fails, the batch is rolled back and each unit is run again on its own,
 * so only the failing one fails. Every caller is answered only after COMMIT returns, so durability
 * per unit is exactly that of one transaction per unit: a reservation is committed before the
 * provider is called, a settle before the client is answered. In WAL mode a committed transaction
 * is in the WAL file, so a process crash loses none.
 *
 * What it saves: one BEGIN/COMMIT and one WAL append of each touched page per batch instead of per
 * unit, and Kysely's transaction machinery (mutex, promise chains, query building) per unit.
 *
 * The batch holds Kysely's single SQLite connection (`hold`) while it runs, so no Kysely query
 * ever interleaves with it.
 */
export class SqliteGroupCommit {
  private queue: Queued[] = [];
  private scheduled = false;
  private readonly tx: UnitTx;

  constructor(
    private readonly sqlite: Libsql.Database,
    private readonly hold: (work: () => Promise<void>) => Promise<void>,
    /** Resets statements libsql left in progress after SQLITE_BUSY (see database.ts), which would fail the COMMIT. */
    private readonly resetStuckStatements: () => void = () => undefined,
  ) {
    // `prepare` is the caching one installed by openSqlite: each text is compiled once.
    this.tx = {
      run: (sql, params) => Promise.resolve(this.sqlite.prepare(sql).run(params).changes),
      // get(), not all(): libsql's all() walks an iterator built per call.
      get: <T>(sql: string, params: unknown[]) => Promise.resolve(this.sqlite.prepare(sql).get(params) as T | undefined),
    };
  }

  readonly submit: UnitRunner = <T>(unit: WriteUnit<T>) =>
    new Promise<T>((resolve, reject) => {
      this.queue.push({ unit, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate, not a microtask: requests that arrived in the same poll phase join the batch.
    setImmediate(() => {
      this.hold(() => this.flush()).catch((err) => {
        // Acquiring the connection failed (the database is closing): nothing ran, tell everyone.
        for (const q of this.queue.splice(0)) q.reject(err);
      });
    });
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const batch = this.queue.splice(0, MAX_UNITS_PER_COMMIT);
    if (this.queue.length) this.schedule();
    if (!batch.length) return;
    const together = await this.commit(batch);
    if (together.ok) {
      batch.forEach((q, i) => q.resolve(together.values[i]));
      return;
    }
    if (batch.length === 1) {
      batch[0]!.reject(together.err);
      return;
    }
    // One unit failed (or the commit did), and the whole batch was rolled back. Rather than pay
    // for a savepoint around every unit on the fast path, run each again in its own transaction,
    // so that only the failing one fails.
    for (const q of batch) {
      const alone = await this.commit([q]);
      if (alone.ok) q.resolve(alone.values[0]);
      else q.reject(alone.err);
    }
  }

  /** Runs the units in one transaction: all of them commit, or (on any error) none does. */
  private async commit(units: Queued[]): Promise<{ ok: true; values: unknown[] } | { ok: false; err: unknown }> {
    const values: unknown[] = [];
    try {
      this.resetStuckStatements();
      this.exec('BEGIN IMMEDIATE');
      for (const q of units) values.push(await q.unit(this.tx));
      this.exec('COMMIT');
      return { ok: true, values };
    } catch (err) {
      if (this.sqlite.inTransaction) this.exec('ROLLBACK');
      return { ok: false, err };
    }
  }

  /**
   * Not through the statement cache: libsql leaves a cached statement refused with SQLITE_BUSY
   * "in progress" (a BEGIN IMMEDIATE meeting another process's lock), and an unfinished statement
   * makes every later COMMIT on the connection fail. exec finalizes what it runs.
   */
  private exec(sql: string): void {
    this.sqlite.exec(sql);
  }
}
