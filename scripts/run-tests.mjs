#!/usr/bin/env node
// Runs every test/**/*.test.ts file with node's own test runner through tsx. Node 20's --test does
// not expand globs itself, so the files are listed here. Arguments narrow the run:
//   npm test -- keys          only files whose path contains "keys"
//   npm run test:unit         only the unit tier: files that start no database server, Redis, chain,
//                             browser or tollgate process (SQLite files are in; scripts/test-tiers.mjs decides)
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildIfStale } from './build.mjs';
import { allTestFiles, unitTestFiles } from './test-tiers.mjs';

const args = process.argv.slice(2);
const unit = args.includes('--unit');
const filters = args.filter((a) => a !== '--unit');
const files = (unit ? unitTestFiles() : allTestFiles()).filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error(`no test files match ${filters.join(' ')}`);
  process.exit(1);
}
// Tests that run `tollgate` as a process (the CLI, crash and scale-out tests) run dist/: bring it up to
// date once here rather than in every process they start.
await buildIfStale();
// The timeout only catches a hung file. The slowest file (the admin CLI: a new Node process per
// command, on both engines) takes about 70 s alone and went past 120 s in CI beside the crash test.
// The ledger simulation (test/ledger/simulation.test.ts) runs a fixed seed in the unit tier and
// longer sequences from a random seed in the full suite.
// Every temporary folder of the run (databases, PostgreSQL's data, chains' states, browsers' profiles) is made in one
// folder, removed when the run ends: a test file stopped at its timeout never runs its own clean-up, and what it left
// (tens of MB a file) would otherwise stay in the system's temporary folder for good. Readable by all: PostgreSQL runs
// as its own user when the tests run as root, and must reach its data folder inside.
const runTemp = mkdtempSync(join(tmpdir(), 'tollgate-tests-'));
chmodSync(runTemp, 0o755);
const env = { ...process.env, TMPDIR: runTemp, TOLLGATE_SIMULATION: process.env.TOLLGATE_SIMULATION ?? (unit ? 'fixed' : 'random') };
// Each test file's process exits on SIGINT and SIGTERM (exit-on-signal.mjs), so the servers it started are stopped by
// their exit hooks: the runner stops a file at its timeout with SIGTERM.
const preload = ['--import', 'tsx', '--import', new URL('../test/support/exit-on-signal.mjs', import.meta.url).href];
const child = spawn(process.execPath, [...preload, '--test', '--test-concurrency=2', '--test-timeout=300000', ...files], { stdio: 'inherit', env });
// Ctrl-C or a CI's stop: passed on to the test runner, whose exit (below) removes the run's folder.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  try {
    rmSync(runTemp, { recursive: true, force: true, maxRetries: 3 });
  } catch (err) {
    process.stderr.write(`could not remove the run's temporary folder ${runTemp}: ${err.message}\n`);
  }
  process.exit(code ?? (signal ? 1 : 0));
});
