import { after } from 'node:test';
import type { Engine } from '../../src/storage/database.ts';
import { startPostgres, type PostgresServer } from './postgres.ts';
import { freshSqliteUrl } from './sqlite-engine.ts';

export { tempDir } from './sqlite-engine.ts';

/**
 * Fresh databases for tests: a SQLite file in a temporary folder (./sqlite-engine.ts), or a new
 * database on a PostgreSQL server this test file starts once (lazily) and stops when the file's
 * tests end. A test that runs on SQLite only imports ./sqlite-engine.ts instead, and stays in the
 * unit tier.
 */
let pgServer: Promise<PostgresServer> | undefined;

after(async () => {
  if (pgServer) await (await pgServer).stop();
});

export const ENGINES: Engine[] = ['sqlite', 'postgres'];

export async function freshDatabaseUrl(engine: Engine): Promise<string> {
  if (engine === 'sqlite') return freshSqliteUrl();
  pgServer ??= startPostgres();
  return (await pgServer).database();
}
