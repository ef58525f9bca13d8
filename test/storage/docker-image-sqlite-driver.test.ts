import assert from 'node:assert/strict';
import { cpSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';
import { sqliteOpenProblem } from '../../src/storage/database.ts';
import { tempDir } from '../support/sqlite-engine.ts';

/**
 * Attack on the driver change (libsql -> better-sqlite3) from the deployment side. libsql shipped its
 * native library as a per-platform npm package, so an install without scripts still opened SQLite.
 * better-sqlite3 gets its binary from its install script (a prebuilt download, or a compile): an
 * install with --ignore-scripts, which is what the shipped Dockerfile runs, leaves a package that
 * imports but cannot open any database, and a SQLite gateway in that image fails at start.
 */
const ROOT = join(import.meta.dirname, '..', '..');

test('better-sqlite3 installed without its install script imports, but cannot open a database', () => {
  const dir = tempDir();
  const modules = join(dir, 'node_modules');
  // What `npm ci --ignore-scripts` leaves: the package's files and its dependencies, no build/.
  mkdirSync(join(modules, 'better-sqlite3'), { recursive: true });
  cpSync(join(ROOT, 'node_modules/better-sqlite3/package.json'), join(modules, 'better-sqlite3/package.json'));
  cpSync(join(ROOT, 'node_modules/better-sqlite3/lib'), join(modules, 'better-sqlite3/lib'), { recursive: true });
  for (const dep of ['bindings', 'file-uri-to-path']) cpSync(join(ROOT, 'node_modules', dep), join(modules, dep), { recursive: true });
  const Sqlite = createRequire(join(dir, 'index.js'))('better-sqlite3') as new (file: string) => unknown;
  let failure: unknown;
  assert.throws(() => {
    try {
      new Sqlite(':memory:');
    } catch (err) {
      failure = err;
      throw err;
    }
  }, /Could not locate the bindings file/);
  // What the operator is told at start: the driver and how to build it, not to check the database file.
  const told = sqliteOpenProblem('/srv/tollgate/tollgate.db', failure);
  assert.match(told, /better-sqlite3.*npm rebuild better-sqlite3/);
  assert.doesNotMatch(told, /database file|\n/);
  const manifest = JSON.parse(readFileSync(join(ROOT, 'node_modules/better-sqlite3/package.json'), 'utf8')) as { scripts: { install?: string } };
  assert.match(manifest.scripts.install ?? '', /prebuild-install|node-gyp/, 'the binary comes from the install script');
});

test("the Docker image's production install gives better-sqlite3 its binary", () => {
  const dockerfile = readFileSync(join(ROOT, 'deploy/docker/Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const stages = dockerfile.split(/^FROM /m).slice(1);
  const image = stages.at(-1)!;
  const runs = [...image.matchAll(/^RUN (.+)$/gm)].map((m) => m[1]!);
  const install = runs.findIndex((r) => /\bnpm ci\b/.test(r));
  assert.ok(install >= 0, 'the image installs its production dependencies with npm ci');
  if (!/--ignore-scripts/.test(runs[install]!)) return;
  // Scripts skipped (the root package's `prepare` would try to build): the driver's own script must still run.
  const rebuilt = runs.slice(install).some((r) => /\bnpm (?:rebuild|run-script|explore)\b[^&;]*\bbetter-sqlite3\b/.test(r));
  assert.ok(rebuilt, `the final stage runs "${runs[install]}" and never builds better-sqlite3's binary: a SQLite gateway in this image cannot start`);
});
