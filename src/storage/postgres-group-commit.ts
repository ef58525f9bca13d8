import type PgModule from 'pg';
import { GroupCommit, type BatchOutcome, type Queued } from './group-commit.ts';
import type { UnitTx } from './write-units.ts';

/**
 * Units one PostgreSQL transaction takes at most. A batch holds its wallets' row locks until its
 * COMMIT, so this bounds how long a writer outside the batch (a top-up, the sweeper) can wait for
 * one: 256 one-statement units are 70-120 ms of server work here.
 */
const MAX_UNITS_PER_COMMIT = 256;

/** Statement texts given a name at most (the ledger's units have a few dozen). */
const MAX_PREPARED = 500;

/**
 * PostgreSQL group commit (see group-commit.ts): one connection per batch, `BEGIN`, the units'
 * statements, `COMMIT`, the one-statement units' sent together with BEGIN and COMMIT in one round
 * trip (pipeline mode, see transaction).
 *
 * What it saves, measured in DECISIONS-pgbatch.md: a commit and a round trip per unit, and the
 * row-lock queue of one hot wallet. With a statement per unit on its own connection, every
 * reserve and settle of a wallet waits for the row lock and is woken by the one before it, a
 * context switch per handover on the server; here the batch takes the lock once and its units run
 * back to back on one backend.
 *
 * One batch at a time per lane (postgres-lanes.ts), so this process's batches never wait on each
 * other's row locks. Another instance's batches may lock the same wallets: each batch takes its
 * wallets in ascending order (`order`), so two batches wait for each other at most in one direction
 * and never close a cycle. Writers outside the batches (top-ups, admin credits, the sweeper) can
 * still meet a batch in a lock cycle; PostgreSQL then aborts one side (40P01). If it is the batch,
 * the failed unit's error rolls it back and each unit runs again alone, so no caller sees it.
 *
 * Statements are prepared once per connection (named statements): the ledger's CTE statements cost
 * about as much to plan as to run.
 */
export class PostgresGroupCommit extends GroupCommit {
  private client: PgModule.PoolClient | null = null;
  /** The held connection failed in a way that leaves it unusable: the pool must drop it. */
  private broken = false;
  private readonly tx: UnitTx;

  /** `pool`: connections in pipeline mode (see transaction), used by nothing else. */
  constructor(private readonly pool: PgModule.Pool) {
    super(MAX_UNITS_PER_COMMIT);
    this.tx = {
      run: async (sql, params) => (await this.query(sql, params)).rowCount ?? 0,
      get: async <T>(sql: string, params: unknown[]) => (await this.query(sql, params)).rows[0] as T | undefined,
    };
  }

  /**
   * By wallet: every unit locks its wallet's row first (or its reservation, then the wallet), and
   * the rest of what it writes belongs to that wallet, so locks are taken in one global order.
   * Stable, so one wallet's units keep the order they were sent in.
   */
  protected override order(batch: Queued[]): Queued[] {
    // Code-unit order, the same in every process (localeCompare would depend on the locale).
    return batch.sort((a, b) => ((a.wallet ?? '') < (b.wallet ?? '') ? -1 : (a.wallet ?? '') > (b.wallet ?? '') ? 1 : 0));
  }

  protected async hold(work: () => Promise<void>): Promise<void> {
    const client = await this.pool.connect();
    this.client = client;
    this.broken = false;
    try {
      await work();
    } finally {
      this.client = null;
      // release(true) destroys the client instead of handing a dead connection to the next caller.
      client.release(this.broken);
    }
  }

  /**
   * The connection is in pg's pipeline mode: a query is written at once, without waiting for the
   * answers before it. So BEGIN, the statement of every one-statement unit and (when no other unit
   * is left) COMMIT go out together: a batch of reserves and finishes is one round trip, however
   * far the server is. Other units then run one after another, each statement awaited, since they
   * read before they write.
   */
  protected async transaction(batch: Queued[]): Promise<BatchOutcome> {
    const client = this.client!;
    const values: unknown[] = new Array(batch.length);
    const failedAlone = new Map<number, unknown>();
    const begin = client.query('BEGIN');
    const statements = batch.flatMap((q, i) =>
      q.oneStatement
        ? [q.unit(this.oneStatement()).then(
            (value) => void (values[i] = value),
            (err) => void failedAlone.set(i, err),
          )]
        : [],
    );
    const rest = batch.flatMap((q, i) => (q.oneStatement ? [] : [{ q, i }]));
    const commitNow = rest.length === 0 ? client.query('COMMIT') : null;
    // A rejection handled below; without this, one left pending while we wait would be unhandled.
    commitNow?.catch(() => undefined);
    try {
      await begin;
    } catch (err) {
      await Promise.all(statements);
      return this.unknown(err);
    }
    await Promise.all(statements);
    let err: unknown = failedAlone.size ? failedAlone.values().next().value : undefined;
    if (!commitNow) {
      if (err === undefined) {
        try {
          for (const { q, i } of rest) values[i] = await q.unit(this.tx);
        } catch (e) {
          err = e;
        }
      }
      if (err !== undefined) {
        try {
          await client.query('ROLLBACK');
        } catch {
          // The connection is gone with the transaction: nothing committed, but it cannot run the
          // units again either; each caller hears the first error (an outage, for the settler).
          return this.unknown(err);
        }
        return { ok: false, err, retryAlone: true };
      }
    }
    let done: PgModule.QueryResult;
    try {
      done = await (commitNow ?? client.query('COMMIT'));
    } catch (e) {
      // The COMMIT may or may not have been applied (a connection lost after the server took it):
      // running any unit again could apply it twice, so every caller gets the error instead (the
      // settler's retry finds a committed settle by its usage row).
      return this.unknown(e);
    }
    // A transaction a failed statement aborted answers COMMIT with ROLLBACK and no error: nothing
    // committed (a statement sent with the COMMIT failed, or a unit caught its own statement's error).
    if (done.command !== 'COMMIT') return { ok: false, err: err ?? new Error('the batch was rolled back at COMMIT: a unit caught the error of its own statement'), retryAlone: true };
    // Committed although a one-statement unit failed: its statement never reached the server (its
    // values were refused before it was sent), so it failed alone and the others stand.
    return { ok: true, values, failedAlone };
  }

  /** The outcome cannot be known (the connection failed): no rerun, and the connection is dropped. */
  private unknown(err: unknown): BatchOutcome {
    this.broken = true;
    return { ok: false, err, retryAlone: false };
  }

  /**
   * The tx of a unit sent as one statement: a second statement would not be in order, so it fails
   * the unit. Only for units that are one statement by construction (the reserve's and the
   * finish's statement constants): its first statement may already have committed with the batch.
   */
  private oneStatement(): UnitTx {
    let sent = false;
    const once = () => {
      if (sent) throw new Error('a unit sent as one statement ran a second one');
      sent = true;
    };
    return {
      run: async (sql, params) => (once(), this.tx.run(sql, params)),
      get: async <T>(sql: string, params: unknown[]) => (once(), this.tx.get<T>(sql, params)),
    };
  }

  private query(sql: string, params: unknown[]): Promise<PgModule.QueryResult> {
    return this.client!.query({ ...prepared(sql), values: params });
  }
}

/**
 * One name per statement text for the whole process: a pool connection serves every lane in turn,
 * and pg refuses a name it prepared for another text.
 */
const statements = new Map<string, { name?: string; text: string }>();

/**
 * Unit SQL is written with `?` placeholders (see UnitTx); PostgreSQL numbers them. Our unit SQL has
 * no string literals holding '?', so every '?' is a placeholder; a statement already numbered
 * (`$1`, the one-statement reserve and finish) has none and passes unchanged.
 */
function prepared(sql: string): { name?: string; text: string } {
  let statement = statements.get(sql);
  if (statement === undefined) {
    let i = 0;
    const text = sql.replace(/\?/g, () => `$${++i}`);
    // Past the bound (ad-hoc SQL would grow it for ever) a text is sent unnamed, planned each time.
    if (statements.size >= MAX_PREPARED) return { text };
    statement = { name: `tollgate_unit_${statements.size + 1}`, text };
    statements.set(sql, statement);
  }
  return statement;
}
