import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validate, version } from 'uuid';
import { newRequestId } from '../../src/http/request-id.ts';

test('request ids are unique UUIDv7s, ordered by the millisecond they were made in', async () => {
  const ids: string[] = [];
  // More than one refill of the random pool (256 ids), across several milliseconds.
  for (let round = 0; round < 4; round++) {
    for (let i = 0; i < 300; i++) ids.push(newRequestId());
    await new Promise((r) => setTimeout(r, 3));
  }
  assert.equal(new Set(ids).size, ids.length, 'no id repeats');
  for (const id of ids) assert.ok(validate(id) && version(id) === 7, `${id} is a UUIDv7`);
  const millis = ids.map((id) => parseInt(id.replace(/-/g, '').slice(0, 12), 16));
  for (let i = 1; i < millis.length; i++) assert.ok(millis[i]! >= millis[i - 1]!, 'the time prefix never goes back, so index inserts append');
  assert.ok(Math.abs(millis.at(-1)! - Date.now()) < 60_000, 'the prefix is the current time');
});
