import type { Config } from '../config/schema.ts';
import { StartupError } from '../startup-error.ts';
import { redactDatabaseUrl } from '../storage/redact-url.ts';
import { someErrorInChain } from '../outage.ts';

const DEFAULT_PORT_SETTING = 'server.port or TOLLGATE_PORT';

/** Error codes meaning "nothing answered at that address", anywhere in a cause chain. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET']);

/**
 * One line naming what to fix for a start-up failure the operator can act on, or null for a real
 * bug (which keeps its stack). `config` is what was loaded, to name the setting involved.
 */
export function startupFailureMessage(err: unknown, config: Config, portSetting = DEFAULT_PORT_SETTING): string | null {
  if (err instanceof StartupError) return err.message;
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.code === 'EADDRINUSE' || e?.code === 'EACCES' || e?.code === 'EADDRNOTAVAIL') {
    if (e.syscall === 'listen') return listenFailure(e, config, portSetting);
  }
  if (!config.database.url.startsWith('sqlite:')) {
    const code = codesIn(err).find((c) => UNREACHABLE.has(c) || c === '28P01' || c === '3D000' || c === '28000' || c === 'ERR_INVALID_URL');
    const db = redactDatabaseUrl(config.database.url);
    // The driver parses the URL only when it first connects, deep inside the migration.
    if (code === 'ERR_INVALID_URL')
      return `database.url is not a URL PostgreSQL can read (${db}); check its host and port, and percent-encode any @ : / ? # in the user or password (encodeURIComponent)`;
    if (code === '28P01' || code === '28000')
      return `PostgreSQL at ${db} refused the user or password in database.url; fix them (or database.urlEnv's variable)`;
    if (code === '3D000') return `the PostgreSQL database named in ${db} does not exist; create it (createdb <name>) or fix database.url`;
    if (code) return `cannot reach PostgreSQL at ${db} (${code}); start it, or fix database.url (or database.urlEnv's variable)`;
  }
  return null;
}

function listenFailure(e: NodeJS.ErrnoException & { address?: string; port?: number }, config: Config, portSetting: string): string {
  const where = `${e.address ?? config.server.host}:${e.port ?? config.server.port}`;
  if (e.code === 'EADDRINUSE') {
    return `cannot listen on ${where}: the port is already in use (another Tollgate?); stop that process, or choose another port with ${portSetting}`;
  }
  if (e.code === 'EACCES') return `cannot listen on ${where}: ports below 1024 need privileges; choose a port of 1024 or above with ${portSetting}`;
  return `cannot listen on ${where}: the address is not on this machine; fix server.host (0.0.0.0 listens on every interface)`;
}

/** The `code` of an error and of each of its causes (pg's errors, Kysely's wrapped ones). */
function codesIn(err: unknown): string[] {
  const codes: string[] = [];
  // The cycle-safe walk, which also visits an AggregateError's members (a host name with IPv4 and
  // IPv6 addresses, each refused).
  someErrorInChain(err, (e) => {
    if (typeof e.code === 'string') codes.push(e.code);
    return false;
  });
  return codes;
}

/**
 * Runs a command's start-up, turning the failures the operator can fix into a one-line StartupError.
 * `portSetting` names where the command's port is set (the facilitator takes --port).
 */
export async function explainStartupFailures<T>(config: Config, work: () => Promise<T>, portSetting?: string): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const message = startupFailureMessage(err, config, portSetting);
    throw message ? new StartupError(message) : err;
  }
}
