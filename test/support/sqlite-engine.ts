import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';

/**
 * Fresh SQLite databases and temporary folders for tests, removed when the test file's tests end.
 * Apart from test/support/engines.ts (which also starts PostgreSQL) so a test that needs only
 * SQLite stays in the unit tier (scripts/test-tiers.mjs): a file on disk, no server.
 */
const tempDirs: string[] = [];

after(() => {
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

export function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-test-'));
  tempDirs.push(dir);
  return dir;
}

/** A database URL naming a new SQLite file in a temporary folder of its own. */
export function freshSqliteUrl(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-sqlite-'));
  tempDirs.push(dir);
  return `sqlite:${join(dir, 'tollgate.db')}`;
}
