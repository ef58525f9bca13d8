import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import Sqlite from 'better-sqlite3';
import type PgModule from 'pg';
import type { Database } from './schema.ts';
import { startCheckpointer, type Checkpointer } from './checkpointer.ts';
import { ensureSqliteFolder } from './sqlite-folder.ts';
import { StartupError } from '../startup-error.ts';
import { postgresLanes } from './postgres-lanes.ts';
import { SqliteGroupCommit } from './sqlite-group-commit.ts';
import type { UnitRunner } from './write-units.ts';

export type Engine = 'sqlite' | 'postgres';

/** How long a SQLite write waits for a lock another process holds before failing with SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;

export interface Storage {
  db: Kysely<Database>;
  engine: Engine;
  /** Runs short write units (the ledger's reserves and finishes), group-committed (group-commit.ts). */
  writeUnit: UnitRunner;
  /**
   * A SQLite file's background WAL checkpointer (checkpointer.ts), for a long-running server to run
   * as one of its background jobs; absent for PostgreSQL and in-memory SQLite. `close` stops it too.
   */
  checkpoints?: { start(): void; stop(): Promise<void> };
  close(): Promise<void>;
}

/**
 * PostgreSQL: how many group commits run side by side, each on its own connection (beside Kysely's
 * pool), wallets split between them (postgres-lanes.ts). Two: while one batch's round trip is on the
 * wire or its statements run, the other lane's can; a wallet row held outside the ledger stalls
 * half the wallets, not all. One wallet's units are always in one lane, so one hot wallet gains
 * nothing from more; four measured worse than two on the benchmark's 2 cores (docs/DECISIONS.md, Lanes and pool).
 */
const LEDGER_WRITERS = 2;

/** Opens the database the URL names: `sqlite:<path>` (embedded, WAL) or `postgres://…`. */
export function openStorage(url: string, opts: { poolSize?: number; ledgerWriters?: number; backgroundCheckpoints?: boolean } = {}): Storage {
  if (url.startsWith('sqlite:')) return openSqlite(url.slice('sqlite:'.length), opts.backgroundCheckpoints ?? false);
  return openPostgres(url, opts.poolSize ?? 10, opts.ledgerWriters ?? LEDGER_WRITERS);
}

/**
 * `backgroundCheckpoints`: start the checkpointer (see checkpointer.ts) at once; the server starts
 * it as a background job instead (`checkpoints`). Short-lived commands leave it off rather than
 * start a thread for a few statements.
 */
function openSqlite(path: string, backgroundCheckpoints: boolean): Storage {
  const file = path === ':memory:' ? path : resolve(path.replace(/^\/\/(?=\/)/, ''));
  if (file !== ':memory:') ensureSqliteFolder(file);
  // In WAL mode (set on open) readers run beside the single writer; busy_timeout makes a second
  // process (the admin CLI next to a running server) wait for the lock instead of failing at once.
  const sqlite = openSqliteFile(file);
  sqlite.exec('PRAGMA synchronous = NORMAL');
  sqlite.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  sqlite.exec('PRAGMA foreign_keys = ON');
  // SQLite's own checkpoint runs inside a COMMIT, on the event loop. With the background
  // checkpointer doing the copying, it only needs to come due rarely (about 40 MB of WAL) to
  // restart the WAL file; measured, this cut p99 latency at 1,000 req/s by about 3x.
  let checkpointer: Checkpointer | null = null;
  const checkpoints =
    file === ':memory:'
      ? undefined
      : {
          start() {
            checkpointer ??= startCheckpointer(file);
            sqlite.exec('PRAGMA wal_autocheckpoint = 10000');
          },
          async stop() {
            const running = checkpointer;
            if (!running) return;
            checkpointer = null;
            await running.stop();
            // Without the worker, SQLite's own checkpoint is the only one again: back to its default.
            sqlite.exec('PRAGMA wal_autocheckpoint = 1000');
          },
        };
  if (backgroundCheckpoints) checkpoints?.start();
  cachePreparedStatements(sqlite);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  const groupCommit = new SqliteGroupCommit(sqlite, (work) => db.connection().execute(work));
  const close = async () => {
    await checkpoints?.stop();
    await db.destroy();
  };
  return { db, engine: 'sqlite', writeUnit: groupCommit.submit, checkpoints, close };
}

/** Opens the file, or says in one line why it cannot be (a folder in its place, no permission). */
function openSqliteFile(file: string): Sqlite.Database {
  try {
    const sqlite = new Sqlite(file);
    // The first statement is where an unreadable or non-database file shows up.
    sqlite.exec('PRAGMA journal_mode = WAL');
    return sqlite;
  } catch (err) {
    throw new StartupError(sqliteOpenProblem(file, err));
  }
}

/**
 * Why the SQLite file could not be opened, in one line. better-sqlite3's native binary comes from its
 * install script and is built for one version of Node: an install that skipped the script, or a Node
 * upgraded under it, fails the same `new Sqlite(file)`, and the file is not what to check then.
 */
export function sqliteOpenProblem(file: string, err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e?.code === 'ERR_DLOPEN_FAILED' || /Could not locate the bindings file|NODE_MODULE_VERSION/.test(String(e?.message))) {
    return `database.url: the SQLite driver (better-sqlite3) has no native binary for this Node.js ${process.version} (its install script did not run, or Node.js changed since); run "npm rebuild better-sqlite3" where Tollgate is installed`;
  }
  return `database.url: cannot open the SQLite file ${file} (${e?.code ?? e?.message ?? 'error'}); check that it is a database file Tollgate may write, in a writable folder`;
}

/**
 * Kysely prepares every query it runs, and preparing costs more than running for the ledger's
 * short statements. Our queries are parameterised, so their SQL text repeats: keep the compiled
 * statement per text. Safe because Kysely runs one query at a time on this connection, and SQLite
 * re-prepares a cached statement by itself after a schema change. A statement whose step failed
 * (SQLITE_BUSY from a lock another process held) is reset by better-sqlite3 before it throws, so a
 * cached one never stays "in progress" and blocks later COMMITs (test/outages/sqlite-busy.test.ts).
 */
function cachePreparedStatements(sqlite: Sqlite.Database): void {
  const prepare = sqlite.prepare.bind(sqlite);
  const cache = new Map<string, ReturnType<typeof prepare>>();
  sqlite.prepare = ((source: string) => {
    let statement = cache.get(source);
    if (!statement) {
      statement = prepare(source);
      // Ad-hoc SQL (admin queries with inlined values) must not grow the cache without bound.
      if (cache.size < 500) cache.set(source, statement);
    }
    return statement;
  }) as typeof sqlite.prepare;
}

// pg returns BIGINT (int8) and NUMERIC as strings to protect precision. Our money and times are far
// below 2^53, so they are parsed as numbers; anything unsafe fails loudly instead of rounding.
function parseSafeInteger(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new RangeError(`database value ${text} is outside the safe integer range`);
  return n;
}

function openPostgres(url: string, max: number, ledgerWriters: number): Storage {
  // Loaded only for a PostgreSQL URL (a SQLite gateway starts faster and smaller without it); pg is
  // CommonJS, so require keeps openStorage synchronous.
  const pg = createRequire(import.meta.url)('pg') as typeof PgModule;
  const types = {
    getTypeParser(oid: number, format?: 'text' | 'binary') {
      if (oid === 20 || oid === 1700) return parseSafeInteger;
      return pg.types.getTypeParser(oid, format as 'text');
    },
  };
  // A request waits at most 5 s for a connection (a server that refuses fails at once; one that
  // does not answer, or a pool exhausted by hung queries, would otherwise wait forever) and then
  // gets a 503. Keep-alive notices a dead peer on idle connections; its first probe after 10 s of
  // silence rather than the OS default of 2 h, so a flow a NAT or failover dropped is found before a
  // ledger batch takes the connection (a batch in flight has its own deadline: BATCH_DEADLINE_MS).
  const newPool = (size: number, pipeline = false) => {
    const pool = new pg.Pool({
      connectionString: url,
      max: size,
      types: types as never,
      connectionTimeoutMillis: 5_000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      pipeline,
    });
    // A client whose connection drops (a server restart: 57P01, "Connection terminated
    // unexpectedly") emits 'error' besides failing its query; with no listener that event would kill
    // the process. The pool covers idle clients; this covers the ones checked out by a query, whose
    // query still fails (and becomes a 503), and the pool then discards the broken client.
    pool.on('error', () => undefined);
    pool.on('connect', (client) => client.on('error', () => undefined));
    return pool;
  };
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: newPool(max) }) });
  // The ledger's writers: a connection per lane of the group commit, in pipeline mode (see
  // postgres-group-commit.ts), apart from Kysely's, whose queries do not expect it.
  const writers = newPool(ledgerWriters, true);
  const close = async () => {
    await db.destroy();
    await writers.end();
  };
  return { db, engine: 'postgres', writeUnit: postgresLanes(writers, ledgerWriters), close };
}
