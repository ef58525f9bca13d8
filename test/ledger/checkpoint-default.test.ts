import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkpointEverySeconds } from '../../src/services.ts';

// The checkpoint job's default follows the engine: on PostgreSQL the pass runs in the database
// server; on SQLite in a worker thread of the serving process, whose core the requests need.
test('unset, the checkpoint job runs every 60 s on PostgreSQL and is off on SQLite; a configured value wins on both', () => {
  assert.equal(checkpointEverySeconds(undefined, 'postgres'), 60);
  assert.equal(checkpointEverySeconds(undefined, 'sqlite'), 0);
  assert.equal(checkpointEverySeconds(30, 'sqlite'), 30);
  assert.equal(checkpointEverySeconds(0, 'postgres'), 0);
});
