import type { Logger } from 'pino';
import type { Storage } from '../../storage/database.ts';
import { DependencyUnavailable } from '../../outage.ts';
import { isDatabaseOutage } from '../../storage/database-outage.ts';
import { finishReservation } from '../operations/finish.ts';
import type { SettleOutcome, SettleRecord } from '../reservations.ts';
import { applySettle, billedEarlier, type ApplyOutcome } from './apply-settle.ts';
import type { SettleSpool } from './spool-file.ts';
import type { SettleFailure } from '../../fail-points.ts';

/**
 * Retries of a settle the database did not take, before it is spooled: about 4 s in all, long
 * enough for a PostgreSQL restart's connection errors or a short SQLite lock, short enough that a
 * client is not kept waiting much longer than the outage answer would take.
 */
const RETRY_DELAYS_MS = [250, 500, 1000, 2000];

export interface DurableSettler {
  /**
   * Bills a produced answer: settles it now, retrying a database outage within RETRY_DELAYS_MS
   * (spooling a delivered answer, `lateIfReleased`, before the retries), and answers `deferred`,
   * spooled, if the database still does not answer. `lateIfReleased`:
   * charge it even if its reservation was released meanwhile (content already delivered).
   */
  settle(record: SettleRecord, opts: { lateIfReleased: boolean }): Promise<SettleOutcome>;
  /** Applies what the spool holds; stops at the first outage (the next round tries again). */
  replay(): Promise<void>;
}

export interface SettlerDeps {
  storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>;
  spool: SettleSpool;
  logger: Logger;
  /** A spooled settle was applied: count the charge (the request's own metrics skipped it). */
  onApplied(record: SettleRecord, outcome: SettleOutcome): void;
  /** A delivered answer could be neither settled nor spooled: its charge is lost (see unbillable). */
  onUnbilled(record: SettleRecord): void;
  /** TEST ONLY (src/fail-points.ts): settles fail as if the database did not answer. */
  failure: () => SettleFailure;
}

export function createDurableSettler(deps: SettlerDeps): DurableSettler {
  const { storage, spool, logger } = deps;
  let replaying: Promise<void> | null = null;

  const injectFailure = () => {
    if (deps.failure()) throw Object.assign(new Error('test fail point: the database does not answer'), { code: 'ECONNREFUSED' });
  };

  /** Settles this process is still retrying: their spool lines are theirs until they finish. */
  const retrying = new Set<string>();
  /**
   * Settles this process answered `deferred`: their requests' metrics skipped the charge, left to
   * the replay. One may have committed before its connection dropped (the replay then finds it
   * already billed), so the replay counts these from their usage row. In memory only: a restart
   * forgets them, as it resets every counter.
   */
  const deferredHere = new Set<string>();

  const settle = async (record: SettleRecord, opts: { lateIfReleased: boolean }): Promise<SettleOutcome> => {
    let spooled = false;
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          injectFailure();
          const outcome = opts.lateIfReleased
            ? outcomeOf(await applySettle(storage, record))
            : await finishReservation(storage, record.requestId, record.chargeUsdc, record.usage);
          // An attempt that failed as an outage may have committed anyway (PostgreSQL's connection
          // dropped after the COMMIT): this retry then finds the request billed, by that attempt.
          // The wallet paid, so report the charge; "not applied" would withhold a paid answer.
          if (!outcome.applied && attempt > 0) return (await billedEarlier(storage, record)) ?? outcome;
          return outcome;
        } catch (err) {
          if (!isDatabaseOutage(err)) throw err;
          // Only a delivered answer (a stream's content is out) is spooled before the retries: see
          // spoolBeforeRetrying for why a withheld one must not be.
          if (!spooled && opts.lateIfReleased) spooled = spoolBeforeRetrying(record);
          if (attempt >= RETRY_DELAYS_MS.length) break;
          await new Promise((r) => setTimeout(r, RETRY_DELAYS_MS[attempt]));
        }
      }
    } finally {
      retrying.delete(record.requestId);
    }
    // Not on disk yet (a non-streaming answer, or the early append failed): the last chance.
    if (!spooled) appendOrRefuse(record, opts.lateIfReleased);
    deferredHere.add(record.requestId);
    logger.warn(
      { reqId: record.requestId, chargeUsdc: record.chargeUsdc },
      'the database did not answer; the settle is spooled and will be applied when it does',
    );
    if (deps.failure() === 'crash') {
      logger.warn({ reqId: record.requestId }, 'test fail point reached: settle spooled, stopping here');
      return new Promise<never>(() => undefined);
    }
    return { applied: true, chargedUsdc: record.chargeUsdc, shortfallUsdc: 0, balanceUsdc: null, deferred: true };
  };

  /**
   * Writes a delivered answer's settle to the spool at its first outage, before the retries: a
   * process that dies while retrying (a kill -9, an OOM) leaves it on disk for the next start-up to
   * apply, where it would otherwise be lost and the sweeper would void the reservation of content
   * already delivered. If a retry then succeeds the line stays, and the next replay finds the
   * request billed and forgets it (applying is idempotent by request id). Only the outage path pays
   * this fsync; a healthy settle never does.
   *
   * A non-streaming answer is not: it is handed out only once this settle returns, so a process
   * that dies while retrying delivered nothing and charges nothing (as any request in flight at a
   * kill). And a retry that finds its reservation released withholds the answer, charging nothing;
   * a line spooled before would late-charge it at the next replay.
   */
  const spoolBeforeRetrying = (record: SettleRecord): boolean => {
    try {
      spool.append(record);
      retrying.add(record.requestId);
      logger.warn({ reqId: record.requestId }, 'the database did not answer the settle; spooled, retrying');
      return true;
    } catch (err) {
      logger.error({ err, reqId: record.requestId }, 'spooling a settle failed; retrying the database, and spooling again after the retries');
      return false;
    }
  };

  /**
   * The database did not answer and the spool cannot be written (disk full, read-only, EISDIR):
   * the settle is lost. Throws DependencyUnavailable, so a non-streaming answer is withheld with a
   * 503 and Retry-After (nothing was delivered; the caller releases its reservation, nothing is
   * charged). A streamed answer is already out: it is delivered and unbilled, which must not pass
   * silently as the sweeper's void would; it is logged at error level and counted.
   */
  const appendOrRefuse = (record: SettleRecord, delivered: boolean): void => {
    try {
      spool.append(record);
    } catch (err) {
      if (delivered) {
        logger.error(
          { err, reqId: record.requestId, wallet: record.wallet, chargeUsdc: record.chargeUsdc },
          'delivered answer could not be billed: the database did not answer and the settle spool could not be written',
        );
        deps.onUnbilled(record);
      } else {
        logger.error(
          { err, reqId: record.requestId },
          'the settle spool could not be written while the database did not answer; the answer is withheld, nothing charged',
        );
      }
      throw new DependencyUnavailable('database', { cause: err });
    }
  };

  /** A line found already billed: counted in the metrics if this process answered it `deferred`. */
  const countIfDeferredHere = async (record: SettleRecord): Promise<void> => {
    if (!deferredHere.has(record.requestId)) return;
    const billed = await billedEarlier(storage, record);
    deferredHere.delete(record.requestId);
    if (billed) deps.onApplied(record, billed);
  };

  const replayOnce = async () => {
    if (deps.failure()) return;
    const { records, forget } = spool.read();
    if (!records.length) return;
    const applied = new Set<string>();
    for (const record of records) {
      // Its own settle is still retrying: leave the line to it (and to the next round), so the
      // charge is applied and counted once, by whichever finishes it.
      if (retrying.has(record.requestId)) continue;
      let result: ApplyOutcome;
      try {
        result = await applySettle(storage, record);
        if (result.kind === 'already_billed') await countIfDeferredHere(record);
      } catch (err) {
        if (isDatabaseOutage(err)) break;
        logger.error({ err, reqId: record.requestId }, 'applying a spooled settle failed; it stays in the spool');
        continue;
      }
      if (result.kind === 'unknown') {
        logger.error({ reqId: record.requestId }, 'a spooled settle names no reservation in this database; it stays in the spool for the operator');
        continue;
      }
      applied.add(record.requestId);
      if (result.kind === 'already_billed') continue;
      deferredHere.delete(record.requestId);
      deps.onApplied(record, result.outcome);
      const late = result.kind === 'late';
      const log = result.outcome.shortfallUsdc > 0 ? logger.error.bind(logger) : logger.info.bind(logger);
      log(
        { reqId: record.requestId, chargedUsdc: result.outcome.chargedUsdc, shortfallUsdc: result.outcome.shortfallUsdc, late },
        late ? 'spooled settle charged late (its reservation had been released)' : 'spooled settle applied',
      );
    }
    forget(applied);
  };

  return {
    settle,
    replay() {
      replaying ??= replayOnce().finally(() => (replaying = null));
      return replaying;
    },
  };
}

function outcomeOf(result: ApplyOutcome): SettleOutcome {
  if (result.kind === 'settled' || result.kind === 'late') return result.outcome;
  return { applied: false, chargedUsdc: 0, shortfallUsdc: 0, balanceUsdc: null };
}
