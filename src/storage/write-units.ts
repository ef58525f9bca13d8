import { sql, type Kysely } from 'kysely';
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
  /**
   * Runs a counter statement: one that only adds the parameters at `sumAt` to the rows its other
   * parameters name, and whose rows exist or are created by it (an upsert), so that any number of
   * them on the same rows commute. An engine may write it later in the same transaction, before
   * COMMIT and before any statement that reads or writes its table, adding up the ones on the
   * same rows (SQLite's group commit: batch-counters.ts). Optional: without it, it runs at once.
   */
  addToCounters?(sql: string, params: unknown[], sumAt: readonly number[]): void;
}

/**
 * All or nothing: a unit either commits every statement it ran, or none of them (it threw). A unit
 * may await only its `tx` calls: it runs while the other units of its batch wait (group-commit.ts),
 * and it may run twice (once in its batch, once alone), so it must not act outside its tx.
 */
export type WriteUnit<T> = (tx: UnitTx) => Promise<T>;

/** What a caller may say of its unit, for the group commit to run it well; neither changes what it does. */
export interface UnitOptions {
  /**
   * The wallet whose row the unit locks. PostgreSQL sends all the units of a wallet to the same
   * writer and runs a batch's units in wallet order (postgres-lanes.ts, postgres-group-commit.ts).
   */
  wallet?: string;
  /**
   * The unit runs exactly one statement (the one-statement reserve and finish): PostgreSQL sends it
   * without waiting for the units before it in its batch. A second statement makes it fail.
   */
  oneStatement?: boolean;
  /**
   * With oneStatement: the unit's value is its statement's answer, and nothing of the unit can fail
   * once the statement has run. PostgreSQL may then send COMMIT in the same write as the statement
   * (postgres-group-commit.ts); a unit that could still throw must not say so, since a COMMIT already
   * sent cannot be taken back.
   */
  nothingAfterStatement?: boolean;
}

/** Runs write units; each promise settles only once the unit is committed (or rolled back). */
export type UnitRunner = <T>(unit: WriteUnit<T>, opts?: UnitOptions) => Promise<T>;

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
