// Which test files are the fast unit tier: those that reach none of the harnesses that start a
// database server, Redis, anvil, a browser or a `tollgate` process. A SQLite file is no server: a
// test that needs only SQLite imports test/support/sqlite-engine.ts and stays in the tier. Decided from the import graph of each
// test file (read with TypeScript's pre-processor, as scripts/import-graph.mjs does), so a test
// moves out of the tier by itself the day it starts using one of them; nobody keeps a list.
//   node scripts/test-tiers.mjs        print the unit tier's files and how many are left out
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Modules that start (or open) something outside the test process's own memory and loopback fakes. */
export const SERVICE_MODULES = [
  'test/support/engines.ts', // both engines: a PostgreSQL server beside SQLite files
  'test/support/postgres.ts',
  'test/support/redis.ts',
  'test/support/browser.ts', // Chromium
  'test/support/gateway-process.ts', // `tollgate serve` as a process
  'test/support/cli.ts', // `tollgate` commands as processes
  'src/devchain/anvil.ts', // a chain
];

const importCache = new Map();

/** The repository-relative files `file` imports by a relative specifier. */
function relativeImports(file) {
  if (importCache.has(file)) return importCache.get(file);
  const abs = join(ROOT, file);
  const found = [];
  if (existsSync(abs)) {
    for (const { fileName } of ts.preProcessFile(readFileSync(abs, 'utf8'), true, true).importedFiles) {
      if (fileName.startsWith('.'))
        found.push(
          relative(ROOT, resolve(dirname(abs), fileName))
            .split('\\')
            .join('/'),
        );
    }
  }
  importCache.set(file, found);
  return found;
}

/** The first service module `file` reaches through its imports, or null when it reaches none. */
export function serviceReachedBy(file) {
  const seen = new Set();
  const stack = [file];
  while (stack.length) {
    const f = stack.pop();
    if (seen.has(f)) continue;
    seen.add(f);
    if (SERVICE_MODULES.includes(f)) return f;
    stack.push(...relativeImports(f));
  }
  return null;
}

export function allTestFiles() {
  return testFilesIn('test').sort();
}

/** The *.test.ts files under `dir`, outside node_modules (test/node_modules holds the test clients and their own tests). */
function testFilesIn(dir) {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : testFilesIn(path);
    return e.name.endsWith('.test.ts') ? [path] : [];
  });
}

export function unitTestFiles() {
  return allTestFiles().filter((f) => serviceReachedBy(f) === null);
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const all = allTestFiles();
  const unit = unitTestFiles();
  for (const f of unit) console.log(f);
  console.log(`${unit.length} of ${all.length} test files need no database server, Redis, chain, browser or tollgate process`);
}
