import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DrainBudget } from '../../src/metered/deps.ts';

test('a drain budget hands out at most max slots, and a released slot can be taken again', () => {
  const drains = new DrainBudget(2, 1000);
  const first = drains.tryStart();
  const second = drains.tryStart();
  assert.ok(first && second);
  assert.equal(drains.tryStart(), null, 'a third drain is refused while two run');
  first();
  const third = drains.tryStart();
  assert.ok(third, 'a slot given back is free again');
  assert.equal(drains.tryStart(), null);
});

test('two budgets (two gateways in one process) do not share their count', () => {
  const a = new DrainBudget(1, 1000);
  const b = new DrainBudget(1, 1000);
  assert.ok(a.tryStart());
  assert.ok(b.tryStart(), "one gateway's drain does not use up another's budget");
});
