#!/usr/bin/env node
// Runs every test/**/*.test.ts file with node's own test runner through tsx. Node 20's --test does
// not expand globs itself, so the files are listed here. Extra arguments narrow the run:
//   npm test -- keys          only files whose path contains "keys"
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildIfStale } from './build.mjs';

const filters = process.argv.slice(2);
const files = readdirSync('test', { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.test.ts'))
  .map((f) => join('test', f))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error(`no test files match ${filters.join(' ')}`);
  process.exit(1);
}
// Tests that run `tollgate` as a process (the CLI, crash and scale-out tests) run dist/: bring it up to
// date once here rather than in every process they start.
await buildIfStale();
// The timeout only catches a hung file. The slowest file (the admin CLI: a new Node process per
// command, on both engines) takes about 70 s alone and went past 120 s in CI beside the crash test.
const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=300000', ...files], { stdio: 'inherit' });
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
