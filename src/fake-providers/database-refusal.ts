import { existsSync } from 'node:fs';
import { sql } from 'kysely';
import { KNOWN_CHAINS } from '../chain/known-chains.ts';
import { openStorage } from '../storage/database.ts';
import { refuse } from './built-in.ts';

/**
 * Why `--fake-providers` may not run on this database, or null when it may. The offers in the
 * configuration say what can be bought from now on; the database says what was bought before: a
 * production database started with its offers removed still holds balances paid in real money,
 * and those must not buy canned answers.
 *
 * PostgreSQL is refused outright: it is what several instances share in production, and a trial
 * on one's own machine needs nothing more than a SQLite file. A SQLite file is read for credited
 * payments on any network that is not a known test or local chain; a file that does not exist yet
 * (the first start) holds none.
 */
export async function fakeProvidersDatabaseRefusal(databaseUrl: string): Promise<string | null> {
  if (!databaseUrl.startsWith('sqlite:')) {
    return refuse(
      'database.url is PostgreSQL, the database production gateways share; try Tollgate on a SQLite file (database.url: sqlite:<file>), or run without --fake-providers',
    );
  }
  const path = databaseUrl.slice('sqlite:'.length);
  if (path === ':memory:' || !existsSync(path.replace(/^\/\/(?=\/)/, ''))) return null;
  const storage = openStorage(databaseUrl);
  try {
    const tables = await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'payments'`.execute(storage.db);
    if (tables.rows.length === 0) return null;
    const rows = await storage.db.selectFrom('payments').select('network').distinct().where('status', '=', 'credited').execute();
    const paid = rows.map((r) => r.network).filter((n) => !isTestNetwork(n));
    if (paid.length === 0) return null;
    return refuse(
      `the database holds balances paid on ${paid.join(', ')}, not a known test or local chain, so real money could buy canned answers; use another database file, or run without --fake-providers`,
    );
  } finally {
    await storage.close();
  }
}

/** `eip155:<id>` of a chain the table knows as a test or local chain. */
function isTestNetwork(network: string): boolean {
  const [namespace, id] = network.split(':');
  return namespace === 'eip155' && /^[1-9][0-9]*$/.test(id ?? '') && KNOWN_CHAINS[Number(id)]?.testnet === true;
}
