/**
 * The outage vocabulary every dependency shares: the tag a client puts on an error where it arises
 * (DependencyUnavailable), reading the tag back, walking a cause chain, and the Retry-After clients
 * are told. Which raw driver errors mean "down" is each dependency's own knowledge and lives with
 * its client: the database's in src/storage/database-outage.ts, the RPC's in src/chain/rpc-errors.ts.
 * They import this file, never the reverse, so no classifier has to be imported to tag an error.
 */
/**
 * A dependency the instance needs (the database, Redis) did not answer. Callers do not branch on
 * it: it travels to the central error handler, which answers 503 with Retry-After instead of a 500,
 * because the request was fine and a retry (here or on another instance) can succeed.
 */
export class DependencyUnavailable extends Error {
  constructor(
    readonly dependency: string,
    options?: { cause?: unknown },
  ) {
    super(`${dependency} is unavailable`, options);
    this.name = 'DependencyUnavailable';
  }
}

/**
 * The dependency an error was tagged with where it arose (anywhere in its cause chain), or null.
 * Tagging at the source is what keeps the answer right: a refused socket (ECONNREFUSED) looks the
 * same whether PostgreSQL, Redis or an RPC refused it, so sniffing codes could only guess.
 */
export function taggedDependency(err: unknown): string | null {
  let found: string | null = null;
  someErrorInChain(err, (e) => {
    if (e instanceof DependencyUnavailable) found = e.dependency;
    return found !== null;
  });
  return found;
}

/**
 * What clients are told to wait before retrying after an outage. Short: a restart or a failover
 * takes seconds, and /health drains the instance meanwhile if the outage is local to it.
 */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

/** Walks an error, its `cause` chain and an AggregateError's members (Node's happy-eyeballs connect). */
export function someErrorInChain(err: unknown, test: (e: { code?: unknown; message?: unknown; name?: unknown }) => boolean): boolean {
  const seen = new Set<unknown>();
  const queue = [err];
  while (queue.length) {
    const e = queue.shift() as { code?: unknown; message?: unknown; name?: unknown; cause?: unknown; errors?: unknown } | undefined;
    if (!e || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    if (test(e)) return true;
    queue.push(e.cause);
    if (Array.isArray(e.errors)) queue.push(...e.errors);
  }
  return false;
}
