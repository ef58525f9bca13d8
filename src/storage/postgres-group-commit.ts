import type { Socket } from 'node:net';
import type PgModule from 'pg';
import { CommitOutcomeUnknown, NotCommitted } from './commit-outcome.ts';
import { isDatabaseOutage } from './database-outage.ts';
import { GroupCommit, type BatchOutcome, type Queued } from './group-commit.ts';
import type { UnitTx, WriteUnit } from './write-units.ts';

/**
 * Units one PostgreSQL transaction takes at most. A batch holds its wallets' row locks until its
 * COMMIT, so this bounds how long a writer outside the batch (a top-up, the sweeper) can wait for
 * one, and how long the first unit of a backlog waits for its answer: 64 one-statement units of
 * one wallet are about 4 ms of server work on a quiet machine (reserve 30-40 µs, finish 60-100 µs,
 * the same at 1 or 256 units a transaction: docs/DECISIONS.md, "PostgreSQL's one-wallet queue").
 */
export const MAX_UNITS_PER_COMMIT = 64;

/**
 * Transactions a lane has on its connection at once (see hold and transaction): the next one is
 * written behind the last one's COMMIT instead of after its answer, so a backlog of one wallet goes
 * out as several transactions back to back and the backend never waits for the gateway to read an
 * answer before it starts the next. Together they hold as many units as one batch of 256 did.
 */
export const COMMITS_IN_FLIGHT = 4;

/** Statement texts given a name at most (the ledger's units have a few dozen). */
const MAX_PREPARED = 500;

/**
 * How long one transaction of a batch (BEGIN to COMMIT's answer) may take before its connection is
 * destroyed. A lane runs its transactions on one connection, so a connection that goes silent
 * (half-open TCP: a NAT or failover dropping the flow with no RST) would otherwise stall every
 * wallet of the lane for ever. 10 s is about 100 times the 256 units an honest transaction waits
 * for at most (its own and the ones in flight before it) on a loaded machine (70-120 ms of server
 * work, plus a round trip per unit that reads before it writes), and ten times the server's
 * deadlock_timeout (a lock cycle with a writer outside the batches is broken after 1 s): an
 * honest batch that reaches it is waiting on a row some other session holds far longer than any
 * ledger writer does, and failing it (an outage to its callers) is what we want.
 */
export const BATCH_DEADLINE_MS = 10_000;

/**
 * PostgreSQL group commit (see group-commit.ts): one connection per batch, `BEGIN`, the units'
 * statements, `COMMIT`, the statements of consecutive one-statement units sent together without
 * waiting for each other (pipeline mode, see attempt).
 *
 * What it saves (measured: docs/DECISIONS.md, The ledger and money operations): a commit and a round trip per unit, and the
 * row-lock queue of one hot wallet. With a statement per unit on its own connection, every
 * reserve and settle of a wallet waits for the row lock and is woken by the one before it, a
 * context switch per handover on the server; here the batch takes the lock once and its units run
 * back to back on one backend.
 *
 * One connection per lane (postgres-lanes.ts), its transactions run one after another by its
 * backend, so this process's batches never wait on each other's row locks. Another instance's
 * batches may lock the same wallets: each batch sorts its units by wallet (`order`) and the server runs their statements in exactly that order (a run of
 * one-statement units is pipelined, but a unit that reads before it writes starts only after the
 * run before it answered), so every batch takes its wallets' locks in ascending order and two
 * batches cannot close a cycle. Writers outside the batches (top-ups, admin credits, the sweeper)
 * can still meet a batch in a lock cycle; PostgreSQL then aborts one side (40P01). If it is the
 * batch, the failed unit's error rolls it back and each unit runs again alone, so no caller sees it.
 *
 * Statements are prepared once per connection (named statements): the ledger's CTE statements cost
 * about as much to plan as to run.
 */
export class PostgresGroupCommit extends GroupCommit {
  private client: PgModule.PoolClient | null = null;
  /**
   * Why the held connection cannot be used again (it failed, or its batch outlived the deadline),
   * or null: the pool must then drop it, and no further transaction of this hold may use it.
   */
  private broken: unknown = null;
  /** The batches in flight on `client` (see hold); `connected`: its pool.connect; `dropped`: it went back to the pool. */
  private holders = 0;
  private connected: Promise<void> = Promise.resolve();
  private dropped: Promise<void> = Promise.resolve();
  private onDropped: () => void = () => undefined;
  /** A transaction still writing its statements: the next one's BEGIN waits for it (see attempt). */
  private unsent: Promise<void> | null = null;
  private readonly tx: UnitTx;

  /** `pool`: connections in pipeline mode (see attempt), used by nothing else. */
  constructor(private readonly pool: PgModule.Pool) {
    super(MAX_UNITS_PER_COMMIT, COMMITS_IN_FLIGHT);
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

  /**
   * The batches in flight share one connection: each is pipelined behind the one before it. A new
   * batch takes a connection from the pool only when none is held; one that broke serves no new
   * batch, which waits until the batches still on it have ended and it is dropped.
   */
  protected async hold(work: () => Promise<void>): Promise<void> {
    while (this.holders > 0 && this.broken !== null) await this.dropped;
    this.holders++;
    if (this.holders === 1) {
      this.dropped = new Promise((resolve) => (this.onDropped = resolve));
      this.connected = this.pool.connect().then((client) => {
        this.client = client;
        this.broken = null;
      });
    }
    try {
      await this.connected;
    } catch (err) {
      if (--this.holders === 0) this.onDropped();
      throw err;
    }
    const client = this.client!;
    try {
      await work();
    } catch (err) {
      // The batch code failed midway (a bug): the connection may be inside an open transaction,
      // holding row locks, and must never serve another batch, which would commit this one's writes.
      this.broken ??= err;
      throw err;
    } finally {
      if (--this.holders === 0) {
        this.client = null;
        // release(true) destroys the client instead of handing a dead connection to the next caller.
        client.release(this.broken !== null);
        this.onDropped();
      }
    }
  }

  /**
   * One attempt under the deadline: past it the connection is destroyed, which fails every query
   * still pending on it, and the attempt ends as an unknown outcome (no rerun, an outage to every
   * caller: a COMMIT may have been sent). The lane's next batch takes a fresh connection (hold).
   */
  protected async transaction(batch: Queued[], sent: () => void): Promise<BatchOutcome> {
    // The transactions before this one on the connection have written every statement (so this
    // BEGIN cannot land inside one of them): a rerun alone may follow a batch sent after its own.
    while (this.unsent !== null) await this.unsent;
    let written!: () => void;
    const mine = new Promise<void>((resolve) => (written = resolve));
    this.unsent = mine;
    const release = () => {
      if (this.unsent !== mine) return;
      this.unsent = null;
      written();
      sent();
    };
    try {
      return await this.underDeadline(batch, release);
    } finally {
      release();
    }
  }

  /**
   * A transaction that finds the connection broken before it wrote anything fails as not committed,
   * with no rerun: the connection serves no new statement (hold), and the contract of a broken
   * connection is that its transactions fail rather than wait for the next one (their callers
   * retry: a settle's retry and spool, a client's request after its 503).
   */
  private async underDeadline(batch: Queued[], sent: () => void): Promise<BatchOutcome> {
    if (this.broken !== null) return { ok: false, err: notSent(this.broken), retryAlone: false };
    const client = this.client!;
    const deadline = setTimeout(() => {
      this.broken = new CommitOutcomeUnknown(`the ledger's PostgreSQL batch had no answer within ${BATCH_DEADLINE_MS} ms`, { code: 'ETIMEDOUT' });
      socketOf(client).destroy();
    }, BATCH_DEADLINE_MS);
    try {
      const outcome = await this.attempt(client, batch, sent);
      // Read again: the attempt's awaits may have broken it.
      const broken: unknown = this.broken;
      // Past the deadline every caller hears the deadline, not the connection error it caused.
      if (broken instanceof CommitOutcomeUnknown) return { ok: false, err: broken, retryAlone: false };
      // Broken by another transaction on the connection (or by pg on our side): an answered COMMIT is
      // the truth, an unknown outcome stays one, and a rollback cannot be rerun on this connection.
      if (broken !== null && !outcome.ok && outcome.retryAlone) return { ok: false, err: rolledBackOnBroken(broken), retryAlone: false };
      return outcome;
    } finally {
      clearTimeout(deadline);
    }
  }

  /**
   * The connection is in pg's pipeline mode: a query is written at once, without waiting for the
   * answers before it. So BEGIN and the statements of a run of consecutive one-statement units go
   * out together, a round trip for the whole run. A unit that reads before it writes runs after the
   * run before it has answered, each statement awaited; then the next run. So the server executes
   * the units in the batch's (wallet) order.
   *
   * When a run ends the batch (the ledger's batches are one run: the one-statement reserve and
   * finish), COMMIT goes out in the same write as the run: one round trip and one wake-up of the
   * backend per batch instead of two. All or nothing still holds (write-units.ts): a statement the
   * server refuses aborts the transaction, every statement after it is refused too, and the server
   * answers the COMMIT with ROLLBACK, so nothing committed and each unit runs again alone. COMMIT is
   * pipelined only when every unit of the run says nothing of it can fail once its statement ran
   * (nothingAfterStatement), handed its statement to pg synchronously, and pg took it (see
   * pipelineCommit); otherwise it is sent once every unit has settled, so that a unit failing after
   * its statement still rolls the batch back.
   */
  private async attempt(client: PgModule.PoolClient, batch: Queued[], sent: () => void): Promise<BatchOutcome> {
    const values: unknown[] = new Array(batch.length);
    const failedAlone = new Map<number, unknown>();
    /** The first error of a unit that may have changed something: the batch must roll back. */
    let err: unknown;
    // BEGIN goes out in the same write as the first run (see socketOf).
    const socket = socketOf(client);
    socket.cork();
    const begin = client.query('BEGIN');
    // Awaited below; without this, a rejection left pending while the units run would be unhandled.
    begin.catch(() => undefined);
    /** COMMIT's answer, when it left with the last run. */
    let commit: PipelinedCommit | undefined;
    for (let i = 0; i < batch.length && err === undefined; ) {
      const run: Promise<void>[] = [];
      const sentFlags: { yes: boolean }[] = [];
      let nothingAfter = true;
      if (i > 0) socket.cork();
      for (; i < batch.length && batch[i]!.oneStatement; i++) {
        const at = i;
        const sent = { yes: false };
        sentFlags.push(sent);
        nothingAfter &&= batch[at]!.nothingAfterStatement === true;
        run.push(
          call(batch[at]!.unit, this.oneStatement(sent)).then(
            (value) => void (values[at] = value),
            // Refused before its statement was written: it changed nothing, so it fails alone and
            // the others may commit. After: its statement may have run, so the batch rolls back.
            (e) => void (sent.yes ? (err ??= e) : failedAlone.set(at, e)),
          ),
        );
      }
      try {
        // A microtask, no I/O: nothing else reaches the socket meanwhile, and the run stays corked.
        if (i >= batch.length && run.length > 0 && nothingAfter) commit = await this.pipelineCommit(client, sentFlags);
      } finally {
        // The run's statements are written: one write for all of them (pg writes each query apart).
        socket.uncork();
      }
      // COMMIT is written: the lane's next transaction may go out behind it.
      if (commit) sent();
      await Promise.all(run);
      if (commit) break;
      if (err !== undefined || i >= batch.length) break;
      try {
        values[i] = await call(batch[i]!.unit, this.tx);
      } catch (e) {
        err = e;
      }
      i++;
    }
    try {
      await begin;
    } catch (e) {
      return this.unknown(LOST_IN_FLIGHT, e);
    }
    if (commit) return this.settleCommit(commit, values, failedAlone, err);
    if (err !== undefined) {
      try {
        const rollback = client.query('ROLLBACK');
        sent();
        await rollback;
      } catch (e) {
        // The connection is gone with the transaction, whose COMMIT was never sent: nothing
        // committed, but it cannot run the units again either (an outage, for the settler).
        this.broken ??= e;
        return {
          ok: false,
          err: new NotCommitted("the ledger's PostgreSQL connection was lost before this transaction's COMMIT", { cause: e }),
          retryAlone: false,
        };
      }
      return { ok: false, err, retryAlone: true };
    }
    let done: PgModule.QueryResult;
    try {
      const answer = client.query('COMMIT');
      sent();
      done = await answer;
    } catch (e) {
      // The COMMIT may or may not have been applied (a connection lost after the server took it):
      // running any unit again could apply it twice, so every caller gets the error instead (the
      // settler's retry finds a committed settle by its usage row).
      return this.unknown(LOST_IN_FLIGHT, e);
    }
    // A transaction a failed statement aborted answers COMMIT with ROLLBACK and no error: nothing
    // committed (a unit caught the error of its own statement).
    if (done.command !== 'COMMIT')
      return { ok: false, err: new Error('the batch was rolled back at COMMIT: a unit caught the error of its own statement'), retryAlone: true };
    // Committed although some one-statement units failed: none of their statements was sent.
    return { ok: true, values, failedAlone };
  }

  /**
   * Sends COMMIT behind the last run's statements, still corked, when that is safe: every unit of
   * the run has handed its statement to pg (a unit whose statement would come later must not land
   * after the COMMIT), and pg failed none of them on our side. A value pg cannot encode fails its
   * query synchronously, after pg has written part of it, and marks the connection broken (query)
   * one microtask later, which the await below lets happen; COMMIT then stays unsent, as before.
   */
  private async pipelineCommit(client: PgModule.PoolClient, sentFlags: { yes: boolean }[]): Promise<PipelinedCommit | undefined> {
    await undefined;
    if (this.broken !== null || !sentFlags.every((sent) => sent.yes)) return undefined;
    const answer = client.query('COMMIT');
    // Awaited in settleCommit; without this, its rejection while the run is awaited would be unhandled.
    answer.catch(() => undefined);
    return { answer };
  }

  /**
   * The outcome of a batch whose COMMIT left with its last run. A refused statement aborted the
   * transaction, so the server answered ROLLBACK: nothing committed, and each unit may run again.
   * A unit that failed while the server committed (one that broke its nothingAfterStatement word)
   * cannot be undone: an unknown outcome, no rerun.
   */
  private async settleCommit(commit: PipelinedCommit, values: unknown[], failedAlone: Map<number, unknown>, err: unknown): Promise<BatchOutcome> {
    let done: PgModule.QueryResult;
    try {
      done = await commit.answer;
    } catch (e) {
      return this.unknown(LOST_IN_FLIGHT, err ?? e);
    }
    if (done.command !== 'COMMIT')
      return { ok: false, err: err ?? new Error('the batch was rolled back at COMMIT: one of its statements failed'), retryAlone: true };
    if (err !== undefined) return this.unknown("a unit of the ledger's PostgreSQL batch failed after its statement, sent with the COMMIT", err);
    return { ok: true, values, failedAlone };
  }

  /**
   * The outcome cannot be known (the connection failed with a COMMIT on the wire, or a unit failed
   * after its COMMIT was sent): no rerun, and the connection is dropped. Every caller hears that it
   * is unknown, with what happened as the cause (which says whether it is an outage).
   */
  private unknown(what: string, cause: unknown): BatchOutcome {
    this.broken ??= cause;
    return { ok: false, err: cause instanceof CommitOutcomeUnknown ? cause : new CommitOutcomeUnknown(what, { cause }), retryAlone: false };
  }

  /**
   * The tx of a unit sent as one statement: a second statement would not be in order, so it fails
   * the unit (and, its first statement sent, rolls the batch back). `sent` records whether its
   * statement was handed to the connection.
   */
  private oneStatement(sent: { yes: boolean }): UnitTx {
    const once = () => {
      if (sent.yes) throw new Error('a unit sent as one statement ran a second one');
      sent.yes = true;
    };
    return {
      run: async (sql, params) => (once(), this.tx.run(sql, params)),
      get: async <T>(sql: string, params: unknown[]) => (once(), this.tx.get<T>(sql, params)),
    };
  }

  private query(sql: string, params: unknown[]): Promise<PgModule.QueryResult> {
    const client = this.client!;
    return client.query({ ...onThisConnection(client, prepared(sql)), values: params }).catch((err: unknown) => {
      // An error the server did not send (it has no severity): pg failed on our side, such as a
      // parameter it cannot encode, after it had already sent the statement's Parse. pg then takes
      // the statement for prepared on this connection while the server has discarded it, so every
      // later use of it here would fail. The connection is not trusted again: this batch fails
      // (no rerun on it), and the pool replaces it (hold). A lost connection lands here too.
      if ((err as { severity?: unknown } | null)?.severity === undefined) this.broken ??= err;
      throw err;
    });
  }
}

/**
 * The connection's socket, for cork/uncork around a run: pg writes each query (Bind, Execute, Sync)
 * in a write of its own, one system call and on loopback one wake-up of the server's backend per
 * statement. Corked, the run's statements leave in one write: measured, about two system calls
 * fewer per request on the gateway and fewer wake-ups of the backend (docs/DECISIONS.md, "Group
 * commit, on both engines"). Every query of a run is handed to pg synchronously (call), so the
 * uncork after the loop finds them all buffered; cork is counted, so pg's own cork/uncork inside
 * each query does not flush early.
 */
function socketOf(client: PgModule.PoolClient): ConnectionSocket {
  return connectionOf(client).stream;
}

/**
 * pg's connection: its socket, and the statement names it has sent a Parse for (`submitted`, until
 * the server answers it) and the ones the server has created (`parsed`).
 */
function connectionOf(client: PgModule.PoolClient): {
  stream: ConnectionSocket;
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
} {
  return (client as unknown as { connection: ReturnType<typeof connectionOf> }).connection;
}

/**
 * A named statement whose Parse is still unanswered goes out unnamed (parsed again by the server)
 * instead of as a Bind to that name. pg would send the Bind, counting on the Parse; but a Parse in
 * a transaction that a statement before it aborted is refused (25P02), and a Bind written behind
 * it, in the next pipelined transaction, then names a statement the server never created (26000):
 * that transaction rolled back and its units ran again one by one (measured: 126 statements
 * refused for one failing unit ahead of a text's first use, and once a second Parse of the name,
 * 42P05). So a name is used only once the server has created it, and is parsed by one statement
 * at a time; the price is a plan per use of a text during its first transaction on a connection.
 */
function onThisConnection(client: PgModule.PoolClient, statement: { name?: string; text: string }): { name?: string; text: string } {
  if (statement.name === undefined) return statement;
  const { parsedStatements, submittedNamedStatements } = connectionOf(client);
  const unanswered = parsedStatements[statement.name] === undefined && submittedNamedStatements[statement.name] !== undefined;
  return unanswered ? { text: statement.text } : statement;
}

/**
 * What every unit of a transaction on the wire hears when its connection is lost: up to
 * COMMITS_IN_FLIGHT transactions of MAX_UNITS_PER_COMMIT units each may have committed.
 */
const LOST_IN_FLIGHT = "the ledger's PostgreSQL connection was lost with this transaction on the wire";

/** A transaction that found its connection broken before it wrote its BEGIN. */
function notSent(cause: unknown): NotCommitted {
  return new NotCommitted("the ledger's PostgreSQL connection failed before this transaction was sent", { cause });
}

/**
 * A transaction rolled back on a connection that then broke: nothing committed, and its units cannot
 * run again on it. A lost connection is told as such; pg's own failure on our side (a value it
 * cannot encode) reaches the callers as it is, since it is the unit's to fix, not an outage.
 */
function rolledBackOnBroken(broken: unknown): unknown {
  if (!isDatabaseOutage(broken)) return broken;
  return new NotCommitted("the ledger's PostgreSQL batch rolled back on a connection that then broke", { cause: broken });
}

/** A COMMIT sent with the batch's last run; its answer is awaited once every unit has settled. */
interface PipelinedCommit {
  answer: Promise<PgModule.QueryResult>;
}

/** What this file does with a connection's socket: cork a run, and destroy it past the deadline. */
type ConnectionSocket = Pick<Socket, 'cork' | 'uncork' | 'destroy'>;

/**
 * Calls a unit now, so that its statement is written at once, and turns a synchronous throw (a
 * unit that is not async, refusing its values) into its rejection rather than an escape from the
 * batch code midway through a transaction.
 */
function call<T>(unit: WriteUnit<T>, tx: UnitTx): Promise<T> {
  try {
    // Promise.resolve: a unit typed async but written as a plain function may return a value.
    return Promise.resolve(unit(tx));
  } catch (err) {
    return Promise.reject(err);
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
