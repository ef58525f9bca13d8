import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkpointEverySeconds } from '../../src/services.ts';

// The checkpoint job is on by default on both engines: neither holds the serving instance's event
// loop for a pass (PostgreSQL runs it in the database server, SQLite in a worker thread).
test('unset, the checkpoint job runs every 60 s on PostgreSQL and on SQLite; a configured value wins on both', () => {
  assert.equal(checkpointEverySeconds(undefined, 'postgres'), 60);
  assert.equal(checkpointEverySeconds(undefined, 'sqlite'), 60);
  assert.equal(checkpointEverySeconds(30, 'sqlite'), 30);
  assert.equal(checkpointEverySeconds(0, 'postgres'), 0);
});
