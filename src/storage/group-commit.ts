import { channel } from 'node:diagnostics_channel';
import type { UnitOptions, UnitRunner, WriteUnit } from './write-units.ts';

/**
 * Every batch as it finishes (its size, how long its oldest unit waited, how long it ran), for a
 * profiler to subscribe to (bench/gateway-probe.mjs). Nothing is measured while nobody listens.
 */
const batches = channel('tollgate:group-commit');

/**
 * Group commit, whatever the engine: units submitted in the same turn of the event loop are run
 * one after another in one transaction on one connection, and every caller is answered only after
 * that transaction's COMMIT returns. So durability per unit is exactly that of one transaction per
 * unit (a reservation is committed before the provider is called, a settle before the client is
 * answered), while BEGIN, COMMIT and the connection's hand-over are paid once per batch.
 *
 * Exactly once per unit: if a unit throws, the batch is rolled back and, when the engine can say
 * that nothing was committed (`retryAlone`), each unit is run again in its own transaction, so only
 * the failing one fails. A savepoint around every unit would give the same on the fast path at a
 * price (measured on both engines: DECISIONS.md), paid by every unit for a failure that is rare.
 * When the engine cannot say (a PostgreSQL connection lost at COMMIT) every caller gets the error
 * (CommitOutcomeUnknown, commit-outcome.ts) and nothing runs again: rerunning a unit that may have
 * committed would apply it twice.
 *
 * One batch at a time per instance of this class by default: the next one is formed from what
 * queued while the last ran, so under load batches grow by themselves and no two of them wait on
 * each other. An engine that can queue a transaction behind another on the same connection
 * (PostgreSQL's pipeline) may let up to `maxInFlight` batches run at once: when a full batch
 * (maxUnits) is queued, it is formed as soon as the one before it has written its last statement
 * (its `sent`), not once it is answered, so under a backlog the server always has the next
 * transaction waiting while the answers of the last are read.
 */
export abstract class GroupCommit {
  private queue: Queued[] = [];
  /** The next batch is scheduled (a setImmediate is pending). */
  private scheduled = false;
  /** Batches formed and not yet answered. */
  private inFlight = 0;
  /** The last batch formed has not written all its statements yet: the next one would land inside its transaction. */
  private writing = false;

  constructor(
    /** Units one transaction takes at most, so one commit never holds its locks (or the process) long. */
    private readonly maxUnits: number,
    /** Batches at once (see above); 1: the next batch waits for the last one's answer. */
    private readonly maxInFlight = 1,
  ) {}

  readonly submit: UnitRunner = <T>(unit: WriteUnit<T>, opts: UnitOptions = {}) =>
    new Promise<T>((resolve, reject) => {
      this.queue.push({ unit, ...opts, resolve: resolve as (v: unknown) => void, reject, queuedAt: batches.hasSubscribers ? performance.now() : 0 });
      this.schedule();
    });

  /** How many queued units the next batch takes; the engine may take fewer than `maxUnits` (sqlite-group-commit.ts). */
  protected batchLimit(): number {
    return this.maxUnits;
  }

  /** The order a batch's units run in; any order is theirs to take, since they were sent together. */
  protected order(batch: Queued[]): Queued[] {
    return batch;
  }

  /** Runs `work` with the batch's connection held, so nothing else uses it meanwhile. */
  protected abstract hold(work: () => Promise<void>): Promise<void>;

  /**
   * Runs the units in one transaction: all of them commit, or (on any error) none does. `sent`, if
   * called, says that every statement of it (COMMIT included) is written, so the next batch may go
   * out behind it (with maxInFlight > 1); it is called for the batch anyway once it is answered.
   */
  protected abstract transaction(units: Queued[], sent: () => void): Promise<BatchOutcome>;

  private schedule(): void {
    if (this.scheduled || this.writing || this.inFlight >= this.maxInFlight) return;
    // Behind a batch in flight, only a full one: a transaction costs the process a write and a read
    // of its own, so below a backlog of maxUnits the queue waits and its batch grows (measured: tiny
    // pipelined transactions at saturation cost a third more CPU per request, docs/DECISIONS.md).
    if (this.inFlight > 0 && this.queue.length < this.maxUnits) return;
    this.scheduled = true;
    // setImmediate, not a microtask: requests that arrived in the same poll phase join the batch.
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.order(this.queue.splice(0, Math.min(this.maxUnits, this.batchLimit())));
      this.inFlight++;
      this.writing = true;
      let written = false;
      const sent = () => {
        if (written) return;
        written = true;
        this.writing = false;
        if (this.queue.length) this.schedule();
      };
      this.hold(() => this.flush(batch, sent))
        // Holding the connection failed (the database is closing, or does not answer): nothing
        // ran. A promise already settled ignores the rejection.
        .catch((err) => batch.forEach((q) => q.reject(err)))
        .finally(() => {
          this.inFlight--;
          sent();
          if (this.queue.length) this.schedule();
        });
    });
  }

  private async flush(batch: Queued[], sent: () => void): Promise<void> {
    if (!batch.length) return;
    const started = performance.now();
    const together = await this.transaction(batch, sent);
    if (batches.hasSubscribers) {
      const oldest = Math.min(...batch.map((q) => q.queuedAt || started));
      batches.publish({ at: performance.timeOrigin + started, units: batch.length, waitedMs: started - oldest, ranMs: performance.now() - started });
    }
    if (together.ok) {
      batch.forEach((q, i) => (together.failedAlone?.has(i) ? q.reject(together.failedAlone.get(i)) : q.resolve(together.values[i])));
      return;
    }
    if (batch.length === 1 || !together.retryAlone) {
      batch.forEach((q) => q.reject(together.err));
      return;
    }
    // One unit failed and the whole batch was rolled back: run each again in its own transaction,
    // so that only the failing one fails.
    sent();
    for (const q of batch) {
      const alone = await this.transaction([q], () => undefined);
      if (alone.ok && !alone.failedAlone?.size) q.resolve(alone.values[0]);
      else if (alone.ok) q.reject(alone.failedAlone!.get(0));
      else q.reject(alone.err);
    }
  }
}

export interface Queued extends UnitOptions {
  // A unit may run twice (see flush), so it must not act outside its tx.
  unit: WriteUnit<unknown>;
  resolve(value: unknown): void;
  reject(err: unknown): void;
  /** performance.now() when it was submitted, while a profiler listens to the batches (else 0). */
  queuedAt: number;
}

export type BatchOutcome =
  /**
   * Committed. `failedAlone`: units (by index) that failed before their statement reached the
   * server (PostgreSQL's one-statement units, sent with the COMMIT), so the others committed without them.
   */
  | { ok: true; values: unknown[]; failedAlone?: Map<number, unknown> }
  /** `retryAlone`: the transaction is known not to have committed, so its units may run again. */
  | { ok: false; err: unknown; retryAlone: boolean };
