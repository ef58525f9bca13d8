#!/usr/bin/env node
// Compiles src/ (TypeScript, with `.ts` import specifiers) to dist/ (JavaScript Node runs as is), one
// output file per source file, so `tollgate` starts without a TypeScript loader. Run by `prepare` (on
// `npm install` / `npm ci`), by `npm start`, and by bin/tollgate.mjs and the test runner whenever a
// source is newer than the last build. Type-checking is `npm run typecheck` (part of `npm test`):
// esbuild only strips types, which is why a whole build takes well under a second.
//   node scripts/build.mjs              build now
//   node scripts/build.mjs --if-stale   build only when src/ changed since the last build
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');
const DIST = join(ROOT, 'dist');
// Written last: its time is when the build finished, so a source touched after it means stale.
const STAMP = join(DIST, '.built');
// Another engineer's dashboard bundle; built with everything else when it exists.
const DASHBOARD = join(ROOT, 'scripts', 'build-dashboard.mjs');

function sourceFiles(dir = SRC) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

/** True when dist/ is missing or older than any file under src/ (or this script). */
export function isStale() {
  if (!existsSync(STAMP)) return true;
  const built = statSync(STAMP).mtimeMs;
  return [fileURLToPath(import.meta.url), ...sourceFiles()].some((f) => statSync(f).mtimeMs > built);
}

/**
 * Rewrites every relative import (`./x.ts`) to the compiled file (`./x.js`) and leaves it outside the
 * output file: with `bundle` on, this is how esbuild is made to emit one file per source with its
 * imports intact (it has no such rewrite without bundling). Packages stay imports of node_modules.
 * JSON imported from src/ is inlined instead: esbuild would drop the `with { type: 'json' }` that
 * Node needs on an external JSON import.
 */
const keepImportsPlugin = {
  name: 'keep-relative-imports',
  setup(build) {
    // Every relative module import (not JSON) stays an import: dist/ mirrors src/ file for file, so a relative path
    // (to another source, or out of src/ such as ../../scripts/build-dashboard.mjs) still resolves.
    // Bundling one would move its import.meta.url into the importer's file.
    build.onResolve({ filter: /^\.\.?\/.*\.(ts|mjs|js)$/ }, (args) => {
      if (args.kind === 'entry-point') return undefined;
      return { path: args.path.replace(/\.ts$/, '.js'), external: true };
    });
  },
};

/** Without dev dependencies there is no compiler; a dist/ already built still runs. */
export class EsbuildMissing extends Error {}

export async function build({ quiet = false } = {}) {
  const started = Date.now();
  let esbuild;
  try {
    esbuild = await import('esbuild');
  } catch {
    throw new EsbuildMissing('esbuild is not installed (a dev dependency): run "npm install" without --omit=dev, or build dist/ elsewhere and copy it');
  }
  const files = sourceFiles();
  // Built beside dist/ and swapped in, so a `tollgate` starting meanwhile never sees half a build.
  const tmp = `${DIST}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  await esbuild.build({
    entryPoints: files.filter((f) => f.endsWith('.ts')),
    outdir: tmp,
    outbase: SRC,
    bundle: true,
    packages: 'external',
    plugins: [keepImportsPlugin],
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'warning',
  });
  // Files read at run time rather than imported: the checkpoint worker (.mjs) and the contract artifacts.
  for (const f of files.filter((f) => !f.endsWith('.ts'))) {
    const to = join(tmp, relative(SRC, f));
    mkdirSync(dirname(to), { recursive: true });
    cpSync(f, to);
  }
  writeFileSync(join(tmp, '.built'), `${new Date().toISOString()}\n`);
  swapIn(tmp);
  if (existsSync(DASHBOARD)) {
    const r = spawnSync(process.execPath, [DASHBOARD], { cwd: ROOT, stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`scripts/build-dashboard.mjs failed (exit ${r.status ?? r.signal})`);
  }
  if (!quiet) process.stderr.write(`built dist/ from src/ in ${Date.now() - started} ms\n`);
}

/**
 * Replaces dist/ with the fresh build. Two processes can build at once (several `tollgate`s started
 * together right after an edit): both builds are the same, so whichever loses a rename keeps the
 * winner's dist/ and drops its own.
 */
function swapIn(tmp) {
  const old = `${DIST}.old-${process.pid}`;
  try {
    renameSync(DIST, old);
  } catch (err) {
    if (err.code !== 'ENOENT') throw err;
  }
  try {
    renameSync(tmp, DIST);
  } catch (err) {
    if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    rmSync(tmp, { recursive: true, force: true });
  }
  rmSync(old, { recursive: true, force: true });
}

/** Builds when src/ changed since the last build; returns whether it did. */
export async function buildIfStale(opts = {}) {
  if (!isStale()) return false;
  await build(opts);
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    if (process.argv.includes('--if-stale')) await buildIfStale();
    else await build();
  } catch (err) {
    // `npm ci --omit=dev` runs `prepare` too: with a dist/ copied in, that is not a failure.
    if (err instanceof EsbuildMissing && existsSync(STAMP)) {
      process.stderr.write(`build: ${err.message}; keeping the dist/ already there\n`);
    } else {
      process.stderr.write(`build: ${err.message}\n`);
      process.exit(1);
    }
  }
}
