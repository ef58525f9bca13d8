#!/usr/bin/env node
// Builds the wallet dashboard (web/) into dist/web/: one ES module, one stylesheet and the
// page, minified, with no reference to any other origin (the page is served with a strict CSP).
// Prints the gzipped size and fails above the budget. Usage: node scripts/build-dashboard.mjs
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const WEB = join(root, 'web');
export const OUT = join(root, 'dist', 'web');
/** The whole bundle, gzipped, must stay under this: the dashboard is a page a wallet owner opens, not an app. */
export const BUDGET_BYTES = 200 * 1024;

/** Builds the bundle; resolves with the gzipped size of each file and the total. */
export async function buildDashboard({ quiet = false } = {}) {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  await build({
    entryPoints: { app: join(WEB, 'main.tsx') },
    outdir: OUT,
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022', 'chrome110', 'firefox115', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: join(WEB, 'tsconfig.json'),
    legalComments: 'none',
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: quiet ? 'silent' : 'warning',
  });
  copyFileSync(join(WEB, 'index.html'), join(OUT, 'index.html'));
  const sizes = {};
  let total = 0;
  for (const name of readdirSync(OUT)) {
    const gz = gzipSync(readFileSync(join(OUT, name)), { level: 9 }).length;
    sizes[name] = gz;
    total += gz;
  }
  if (!quiet) {
    for (const [name, gz] of Object.entries(sizes)) console.error(`  ${name.padEnd(12)} ${(gz / 1024).toFixed(1)} KB gzipped`);
    console.error(`dashboard bundle: ${(total / 1024).toFixed(1)} KB gzipped (budget ${BUDGET_BYTES / 1024} KB) in ${OUT}`);
  }
  if (total > BUDGET_BYTES) throw new Error(`the dashboard bundle is ${(total / 1024).toFixed(1)} KB gzipped, over the ${BUDGET_BYTES / 1024} KB budget`);
  return { sizes, total };
}

/** True when dist/web is missing or older than any source file in web/. */
export function dashboardIsStale() {
  let built;
  try {
    built = statSync(join(OUT, 'app.js')).mtimeMs;
  } catch {
    return true;
  }
  const newest = (dir) =>
    Math.max(...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs)));
  return newest(WEB) > built;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  buildDashboard().catch((err) => {
    console.error(err.message);
    process.exit(1);
  });
}
