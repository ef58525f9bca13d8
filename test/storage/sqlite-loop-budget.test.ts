import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openStorage, type Storage } from '../../src/storage/database.ts';
import { LoopBudget } from '../../src/storage/loop-budget.ts';
import { migrateToLatest } from '../../src/storage/migrate.ts';
import { tempDir } from '../support/engines.ts';

/**
 * SQLite's group commit runs its statements on the event loop, so a backlog is committed in
 * slices of about 4 ms with a turn of the loop between them (src/storage/loop-budget.ts) rather
 * than in one batch of up to 256 units that holds every stream of the gateway meanwhile.
 */
describe('the loop budget of a batch', () => {
  test('takes the fewest units until a batch was timed, then as many as fill the budget, within its bounds', () => {
    const b = new LoopBudget(4, 16, 256);
    assert.equal(b.limit(), 16);
    b.ran(16, 0.8); // 50 µs a unit
    assert.equal(b.limit(), 80);
    b.ran(100, 0.1); // 1 µs a unit: the average moves a fifth of the way
    assert.equal(b.limit(), Math.floor(4 / (0.8 * 0.05 + 0.2 * 0.001)));
    const slow = new LoopBudget(4, 16, 256);
    slow.ran(16, 32); // 2 ms a unit: never fewer than the floor
    assert.equal(slow.limit(), 16);
    const fast = new LoopBudget(4, 16, 256);
    fast.ran(16, 0.001);
    assert.equal(fast.limit(), 256);
  });
});

describe('SQLite group commit under a backlog', () => {
  let s: Storage;
  before(async () => {
    s = openStorage(`sqlite:${join(tempDir(), 'loop-budget.db')}`);
    await migrateToLatest(s);
  });
  after(() => s.close());

  test('200 slow units sent at once commit in slices of at most 16, with the event loop turning between them; every one commits', async () => {
    const sizes: number[] = [];
    const onBatch = (b: unknown) => void sizes.push((b as { units: number }).units);
    subscribe('tollgate:group-commit', onBatch);
    let turns = 0;
    let pinging = true;
    const ping = () => {
      turns++;
      if (pinging) setImmediate(ping);
    };
    try {
      setImmediate(ping);
      const spin = (ms: number) => {
        const until = performance.now() + ms;
        while (performance.now() < until);
      };
      const values = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          s.writeUnit(async (tx) => {
            const row = await tx.get<{ n: number }>('SELECT ? AS n', [i]);
            spin(0.5); // a unit that takes 0.5 ms of the loop, as a cold one does on a loaded machine
            return row?.n;
          }),
        ),
      );
      assert.deepEqual(
        values,
        Array.from({ length: 200 }, (_, i) => i),
      );
    } finally {
      pinging = false;
      unsubscribe('tollgate:group-commit', onBatch);
    }
    assert.equal(
      sizes.reduce((a, b) => a + b, 0),
      200,
    );
    assert.ok(Math.max(...sizes) <= 16, `batches of ${sizes.join(', ')} units`);
    assert.ok(turns >= sizes.length - 1, `the loop turned ${turns} times over ${sizes.length} batches`);
  });
});
