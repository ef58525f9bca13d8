#!/usr/bin/env node
// Installs the real clients the tests drive (test/package.json, its own lock) into test/node_modules,
// where every test file finds them first. They are kept out of the gateway's own install because
// several declare Node 22 (engines) while Tollgate runs on Node 20, and a user who only runs the
// gateway needs none of them. Runs before `npm test`; does nothing when the installed tree matches
// the lock (npm records the lock it installed as node_modules/.package-lock.json).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..');
const packagesOf = (file) => (existsSync(file) ? JSON.stringify(JSON.parse(readFileSync(file, 'utf8')).packages ?? {}) : '');

function upToDate() {
  const wanted = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8')).packages ?? {};
  const installed = packagesOf(join(dir, 'node_modules/.package-lock.json'));
  if (!installed) return false;
  const have = JSON.parse(installed);
  // The hidden lock lists what is installed; the root entry ("") is not in it.
  // Optional entries are other platforms' binaries, installed only where they fit.
  return Object.entries(wanted).every(([path, meta]) => path === '' || have[path]?.version === meta.version || (meta.optional && !have[path]));
}

if (!upToDate()) {
  console.error('test clients: npm ci in test/ (the SDKs and coding agents the tests drive)');
  // Their engines warnings are known (docs/DECISIONS.md, "Test clients outside the install"): the suite is their check on Node 20.
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
