// Runs in a worker thread (see checkpointer.ts): copies committed WAL pages into the database file
// on its own connection, so that the event loop does not stall on that copy and its fsync.
// Plain JavaScript on purpose: worker threads do not inherit the tsx loader.
import { parentPort, workerData } from 'node:worker_threads';
import Sqlite from 'better-sqlite3';

const db = new Sqlite(workerData.file);
db.exec('PRAGMA busy_timeout = 1000');
// PASSIVE never waits for the writer or for readers: it copies what it can and returns.
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const timer = setInterval(() => {
  try {
    checkpoint.get();
  } catch {
    // A busy database or a transient I/O error: the next round (or SQLite's own checkpoint) retries.
  }
}, workerData.intervalMs);
parentPort.on('message', (message) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  db.close();
  parentPort.close();
});
