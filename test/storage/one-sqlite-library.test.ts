import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

/**
 * The gateway's process holds one copy of SQLite: the gateway's connection, the WAL checkpointer's
 * and the checkpoint pass's (worker threads, the same process) all open the file through
 * better-sqlite3. SQLite's file locks are POSIX locks, which belong to the process: a second copy of
 * the library (another driver) keeps its own table of open files, so closing its connection would
 * release the locks the first copy holds, and two writers could then change the file at once.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const SQLITE_DRIVERS = /^node_modules\/(?:libsql|@libsql\/[^/]+|sqlite3|better-sqlite3|sql\.js|node-sqlite3-wasm)$/;

test('the gateway installs exactly one SQLite driver: better-sqlite3', () => {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, unknown> };
  const drivers = Object.keys(lock.packages).filter((path) => SQLITE_DRIVERS.test(path));
  assert.deepEqual(drivers, ['node_modules/better-sqlite3']);
});
