import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';

/**
 * Where the settle spool lives, and the fingerprint that binds it to one database. Default: a
 * `spool` directory next to the SQLite file, or ./data/spool for PostgreSQL. An in-memory SQLite
 * database dies with its process, so its spool does too (a private temporary directory).
 */
export function spoolLocation(databaseUrl: string, configuredDir: string | undefined, cwd = process.cwd()): { dir: string; fingerprint: string } {
  const sqlite = databaseUrl.startsWith('sqlite:') ? databaseUrl.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '') : null;
  const identity = sqlite === null ? withoutCredentials(databaseUrl) : sqlite === ':memory:' ? `memory:${process.pid}:${Math.random()}` : resolve(cwd, sqlite);
  const fingerprint = createHash('sha256').update(identity).digest('hex').slice(0, 16);
  if (configuredDir) return { dir: resolve(cwd, configuredDir), fingerprint };
  if (sqlite === ':memory:') return { dir: join(tmpdir(), `tollgate-spool-${process.pid}`), fingerprint };
  return { dir: sqlite === null ? resolve(cwd, 'data/spool') : join(dirname(identity), 'spool'), fingerprint };
}

/** The same database whatever password or pool options the URL carries. */
function withoutCredentials(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return url;
  }
}
