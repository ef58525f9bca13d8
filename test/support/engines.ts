import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import type { Engine } from '../../src/storage/database.ts';
import { startPostgres, type PostgresServer } from './postgres.ts';

/**
 * Fresh databases for tests: a SQLite file in a temporary folder, or a new database on a PostgreSQL
 * server this test file starts once (lazily) and stops when the file's tests end.
 */
let pgServer: Promise<PostgresServer> | undefined;
const tempDirs: string[] = [];

after(async () => {
  if (pgServer) await (await pgServer).stop();
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

export const ENGINES: Engine[] = ['sqlite', 'postgres'];

export async function freshDatabaseUrl(engine: Engine): Promise<string> {
  if (engine === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-sqlite-'));
    tempDirs.push(dir);
    return `sqlite:${join(dir, 'tollgate.db')}`;
  }
  pgServer ??= startPostgres();
  return (await pgServer).database();
}

export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-test-'));
  tempDirs.push(dir);
  return dir;
}
