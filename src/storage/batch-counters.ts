/** Runs one statement now, on the batch's connection. */
export type RunNow = (sql: string, params: unknown[]) => unknown;

/**
 * A group-commit batch's counter statements (UnitTx.addToCounters), added up per row and written
 * once per batch: a batch of 64 reserve-and-finish units on one key writes its spend buckets, its
 * totals and its day's totals a few times instead of 64 times each (on SQLite each statement costs
 * 1.5 µs in the binding alone, bench/README.md).
 *
 * Why the totals stay exact: counter statements only add, so those on the same rows commute, and
 * an addition waits only for statements that do not touch its table. Any other statement that names
 * a table with additions waiting (a unit reading a key's bucket to check its limit, a late charge
 * writing the totals itself) first has them written, so it sees exactly what running each at once
 * would have left. A refused unit never adds (it returns before its counter statements), and a
 * failed batch discards everything with its ROLLBACK: the units re-run alone add theirs again.
 *
 * What it relies on: an UPDATE counter (a finish's spend buckets) adds to rows that exist before
 * the batch or are created by an upsert counter earlier in it; the buckets a reservation counted
 * are never deleted, so a finish always finds them, and the order additions are written in does
 * not change any row.
 */
export class BatchCounters {
  /** Waiting additions, by statement (its table, then its rows: the parameters other than the sums, as a key). */
  private readonly waiting = new Map<string, { table: string; rows: Map<string, unknown[]> }>();
  private readonly tables = new Map<string, string>();
  /** Whether a statement's text names a counter table, found once per text and table (a unit's texts are constants). */
  private readonly named = new Map<string, Map<string, boolean>>();

  add(sql: string, params: unknown[], sumAt: readonly number[]): void {
    let statement = this.waiting.get(sql);
    if (statement === undefined) {
      statement = { table: this.tableOf(sql), rows: new Map() };
      this.waiting.set(sql, statement);
    }
    const row = rowKey(params, sumAt);
    const earlier = statement.rows.get(row);
    if (earlier === undefined) {
      statement.rows.set(row, params);
      return;
    }
    for (const i of sumAt) earlier[i] = Number(earlier[i]) + Number(params[i]);
  }

  /** Before any other statement: writes the additions waiting on a table it names, in any letter case (SQL names are case-insensitive). */
  before(sql: string, run: RunNow): void {
    if (this.waiting.size === 0) return;
    for (const [counter, { table, rows }] of this.waiting) {
      if (!this.names(sql, table)) continue;
      this.waiting.delete(counter);
      for (const params of rows.values()) run(counter, params);
    }
  }

  /** Before COMMIT: writes every addition waiting. */
  writeAll(run: RunNow): void {
    for (const [counter, { rows }] of this.waiting) for (const params of rows.values()) run(counter, params);
    this.waiting.clear();
  }

  /** The transaction was rolled back: what waited was never written, and its units run again. */
  discard(): void {
    this.waiting.clear();
  }

  private tableOf(sql: string): string {
    let table = this.tables.get(sql);
    if (table === undefined) {
      table = /^\s*(?:INSERT\s+INTO|UPDATE)\s+(\w+)/i.exec(sql)?.[1]?.toLowerCase();
      if (table === undefined) throw new Error(`a counter statement must be an INSERT or an UPDATE: ${sql.slice(0, 60)}`);
      this.tables.set(sql, table);
    }
    return table;
  }

  // A search of the text at every statement was the counters' main cost on batches with nothing to add up (bench/README.md).
  private names(sql: string, table: string): boolean {
    let tables = this.named.get(sql);
    if (tables === undefined) {
      tables = new Map();
      // Bounded as the statement cache is (database.ts): a text with inlined values must not grow it for good.
      if (this.named.size < 500) this.named.set(sql, tables);
    }
    let names = tables.get(table);
    if (names === undefined) {
      names = sql.toLowerCase().includes(table);
      tables.set(table, names);
    }
    return names;
  }
}

// The parameters are ids, bucket names, wallets and days, none of which holds a NUL.
function rowKey(params: unknown[], sumAt: readonly number[]): string {
  let key = '';
  for (let i = 0; i < params.length; i++) if (!sumAt.includes(i)) key += `${String(params[i])}\u0000`;
  return key;
}
