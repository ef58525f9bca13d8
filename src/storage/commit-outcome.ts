/**
 * What a caller of a write unit is told when its transaction did not answer normally, in two kinds
 * it must tell apart. Both are outages to the ledger's callers (their cause is the database's own
 * error, which isDatabaseOutage reads through the cause chain): the HTTP layer answers 503 and a
 * request whose reserve failed never reaches the provider; a settle is spooled and retried, and
 * the retry finds a settle that did commit by its usage row, so nothing is charged twice.
 */

/**
 * The transaction may or may not have committed: its COMMIT, or statements a COMMIT may follow,
 * were on the wire when the connection was lost or the batch's deadline passed. Nothing runs again
 * (a rerun could apply it twice); a reservation that did commit is released by the sweeper once
 * its lease runs out.
 */
export class CommitOutcomeUnknown extends Error {
  readonly code: string | undefined;
  constructor(what: string, options: { cause?: unknown; code?: string } = {}) {
    super(`${what}; whether it committed is unknown`, { cause: options.cause });
    this.name = 'CommitOutcomeUnknown';
    this.code = options.code;
  }
}

/** The transaction never left: nothing of it reached the server, so nothing committed. */
export class NotCommitted extends Error {
  constructor(what: string, options: { cause?: unknown } = {}) {
    super(`${what}; nothing of it committed`, options);
    this.name = 'NotCommitted';
  }
}
