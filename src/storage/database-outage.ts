/**
 * Which errors of the database drivers (node-postgres, better-sqlite3, Kysely) mean the database did not
 * answer. Kept beside the storage code rather than in src/outage.ts because it knows SQLSTATEs and
 * driver messages: the shared outage vocabulary stays free of any one dependency's details.
 */
import { someErrorInChain, taggedDependency } from '../outage.ts';

/** Socket-level failures: the server is down, restarting, or unreachable. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);

/**
 * PostgreSQL SQLSTATEs that mean "not now" rather than "wrong query": 57P01 admin_shutdown (a
 * restart), 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up or recovering), 53300
 * too_many_connections, and class 08 (connection exceptions, matched by pattern below). SQLite's
 * counterparts are in SQLITE_NOT_NOW.
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300']);
/**
 * SQLite's BUSY and LOCKED with their extended codes: SQLITE_BUSY_SNAPSHOT (a transaction that read
 * first, then found the file written since), SQLITE_BUSY_RECOVERY (another connection recovering the
 * WAL) and the like are the same "not now".
 */
const SQLITE_NOT_NOW = /^SQLITE_(?:BUSY|LOCKED)(?:_[A-Z]+)?$/;

/**
 * node-postgres and Kysely report some outages only in the message: a connection the server
 * closed mid-query, the pool's connect timeout, and a pool or driver already shut down (a request
 * that arrives while the instance stops).
 */
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Cannot use a pool after calling end|driver has already been destroyed|The database connection is not open/i;

/**
 * True when `err` says the database did not answer, as opposed to refusing a statement. The socket
 * codes below are not the database's alone: an error another dependency's client tagged at its
 * source (DependencyUnavailable) is never taken for the database's. (An RPC's transport errors are
 * told apart by the HTTP error handler, before it asks this.)
 */
export function isDatabaseOutage(err: unknown): boolean {
  if (taggedDependency(err) !== null) return false;
  return someErrorInChain(err, (e) => {
    const code = typeof e.code === 'string' ? e.code : '';
    if (NETWORK_CODES.has(code) || UNAVAILABLE_STATES.has(code) || SQLITE_NOT_NOW.test(code) || /^08[0-9A-Z]{3}$/.test(code)) return true;
    return typeof e.message === 'string' && UNAVAILABLE_MESSAGES.test(e.message);
  });
}
