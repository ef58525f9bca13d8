import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkpointEverySeconds } from '../../src/services.ts';

// The checkpoint job's default follows the engine: a pass on SQLite runs on the serving
// instance's event loop (libsql is synchronous), on PostgreSQL in the database server.
test('unset, the checkpoint job runs every 60 s on PostgreSQL and is off on SQLite; a configured value wins on both', () => {
  assert.equal(checkpointEverySeconds(undefined, 'postgres'), 60);
  assert.equal(checkpointEverySeconds(undefined, 'sqlite'), 0);
  assert.equal(checkpointEverySeconds(30, 'sqlite'), 30);
  assert.equal(checkpointEverySeconds(0, 'postgres'), 0);
});
