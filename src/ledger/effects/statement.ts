import type { UnitTx } from '../../storage/write-units.ts';

/**
 * One definition per money effect, rendered for both engines.
 *
 * The two-phase operations (reserve; settle, void, late charge, expire: src/ledger/operations/)
 * each write some of the same effects: a reservation's state, the wallet's balance and locked
 * amount, the charge entry, the usage row, the key's totals, its day's totals and its spend
 * buckets. Each effect is one fragment in this folder, a function from its operands (SQL
 * expressions) to the SQL text of its statement, and every operation that has the effect uses that
 * fragment, so an aggregate added to one finish is added to every finish.
 *
 * An operation renders its fragments one of two ways, which differ only in where the operands come
 * from:
 * - a write unit (SQLite's group commit, or a PostgreSQL transaction): every operand is a value the
 *   caller binds, `param(name)`, and `unitStatement` turns the text into `?` placeholders;
 * - one PostgreSQL statement of data-modifying CTEs (reserve for a key without a limit, and the
 *   finish): operands are columns of the row the statement locked (`p.charged`) or bound values,
 *   and `postgresStatement` numbers the placeholders `$1`, `$2`, … (one number per name).
 * Rows an INSERT writes come from a `Rows` source: `VALUES (…)` in a unit, `SELECT … FROM` the
 * locked row in the statement.
 *
 * Only src/ledger/ writes the money tables (scripts/money-writers.mjs checks it).
 */

const OPEN = '\u0001';
const CLOSE = '\u0002';
// biome-ignore lint/suspicious/noControlCharactersInRegex: the markers are control characters so that no SQL text can contain them
const MARKER = /\u0001([^\u0002]+)\u0002/g;

/** An operand the caller binds, by name: a marker that compiling replaces with a placeholder. */
export const param = (name: string): string => `${OPEN}${name}${CLOSE}`;

/**
 * Operands that are all bound parameters, each named as its field: what a write unit renders with.
 * (Operand types are records of SQL text, so any field read here is one.)
 */
export function boundOperands<T extends object>(): T {
  return new Proxy({}, { get: (_, name) => param(String(name)) }) as T;
}

/** An effect's operands: SQL text for each (a bound parameter, a column of the locked row, a literal). */
export type Operands<K extends string> = Record<K, string>;

/** Where the row an INSERT writes comes from, given its values in column order. */
export type Rows = (values: readonly string[]) => string;

/** A write unit's row: the values themselves. */
export const VALUES: Rows = (values) => `VALUES (${values.join(', ')})`;

/** A CTE's row: read from `source` (the locked row), only where `where` holds. */
export const selectFrom =
  (source: string, where?: string): Rows =>
  (values) =>
    `SELECT ${values.join(', ')} FROM ${source}${where ? ` WHERE ${where}` : ''}`;

/** SQL text with its parameters named: bind a values object, get the parameter list in placeholder order. */
export interface Statement {
  readonly sql: string;
  params(values: Readonly<Record<string, unknown>>): unknown[];
  run(tx: UnitTx, values: Readonly<Record<string, unknown>>): Promise<number>;
  get<T>(tx: UnitTx, values: Readonly<Record<string, unknown>>): Promise<T | undefined>;
}

function compiled(sql: string, names: string[]): Statement {
  // A plain loop: this runs for every statement of every reserve and finish.
  const params = (values: Readonly<Record<string, unknown>>) => {
    const out = new Array<unknown>(names.length);
    for (let i = 0; i < names.length; i++) {
      const value = values[names[i]!];
      if (value === undefined) throw new Error(`ledger statement: no value for parameter "${names[i]}"`);
      out[i] = value;
    }
    return out;
  };
  return {
    sql,
    params,
    run: (tx, values) => tx.run(sql, params(values)),
    get: <T>(tx: UnitTx, values: Readonly<Record<string, unknown>>) => tx.get<T>(sql, params(values)),
  };
}

/** A write unit's statement: each operand a `?` (SQL written once for both engines, see UnitTx). */
export function unitStatement(text: string): Statement {
  const names: string[] = [];
  const sql = text.replace(MARKER, (_, name: string) => {
    names.push(name);
    return '?';
  });
  return compiled(sql, names);
}

/** A counter statement of a write unit (see UnitTx.addToCounters): it only adds its `sums` operands to the rows its other operands name. */
export interface CounterStatement extends Statement {
  /** Runs it, or lets the engine add it up with the same rows' other additions before the unit commits. */
  add(tx: UnitTx, values: Readonly<Record<string, unknown>>): Promise<void>;
}

/** A write unit's counter statement: `sums` name the operands it adds (every other one names its rows). */
export function counterStatement(text: string, sums: readonly string[]): CounterStatement {
  const statement = unitStatement(text);
  const names = [...text.matchAll(MARKER)].map((m) => m[1]!);
  const sumAt = names.flatMap((name, i) => (sums.includes(name) ? [i] : []));
  if (sums.some((name) => !names.includes(name))) throw new Error(`counter statement: a sum is not one of its operands (${sums.join(', ')})`);
  return {
    ...statement,
    add: async (tx, values) => {
      const params = statement.params(values);
      if (tx.addToCounters) tx.addToCounters(statement.sql, params, sumAt);
      else await tx.run(statement.sql, params);
    },
  };
}

/** A single PostgreSQL statement: `$n` placeholders, the same number wherever a name repeats. */
export function postgresStatement(text: string): Statement {
  const names: string[] = [];
  const sql = text.replace(MARKER, (_, name: string) => {
    let i = names.indexOf(name);
    if (i === -1) i = names.push(name) - 1;
    return `$${i + 1}`;
  });
  return compiled(sql, names);
}
