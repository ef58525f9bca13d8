// Preloaded into every test file's process by scripts/run-tests.mjs. Node's test runner stops a file that ran past
// its timeout with SIGTERM, and Ctrl-C sends SIGINT; by default either ends the process without its 'exit' event, so
// the servers a test started (anvil, PostgreSQL, Redis, `tollgate` processes: src/devchain/processes.ts) kept running
// and anvil's state folder stayed. Exiting on them runs those hooks. Only in the files' processes (the runner
// itself has its own handling), which node marks with NODE_TEST_CONTEXT.
if (process.env.NODE_TEST_CONTEXT) {
  process.once('SIGTERM', () => process.exit(143));
  process.once('SIGINT', () => process.exit(130));
}
