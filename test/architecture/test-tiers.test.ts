import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
// @ts-expect-error: a plain .mjs script with no declaration file.
import { serviceReachedBy, unitTestFiles } from '../../scripts/test-tiers.mjs';

/** `npm run test:unit` picks its files from the import graph: these check that the choice is right. */
describe('the unit test tier', () => {
  test('a file that reaches a database, Redis, a chain, a browser or a tollgate process is left out, naming what it reaches', () => {
    assert.equal(serviceReachedBy('test/http/keys.test.ts'), 'test/support/engines.ts');
    assert.equal(serviceReachedBy('test/dashboard/story.test.ts') !== null, true);
    assert.equal(serviceReachedBy('test/cli/admin.test.ts') !== null, true);
  });

  test('pure modules are in it: translators, pricing, decimal and bucket arithmetic', () => {
    const unit: string[] = unitTestFiles();
    for (const f of [
      'test/protocols/upstream-decoders.test.ts',
      'test/providers/pricing.property.test.ts',
      'test/ledger/usd.test.ts',
      'test/ledger/spend-periods.test.ts',
    ]) {
      assert.ok(unit.includes(f), `${f} is not in the unit tier`);
    }
    for (const f of unit) assert.equal(serviceReachedBy(f), null, f);
  });

  test('a test on SQLite alone is in it: the ledger simulation, through the SQLite harness', () => {
    assert.equal(serviceReachedBy('test/support/sqlite-engine.ts'), null);
    assert.ok(unitTestFiles().includes('test/ledger/simulation.test.ts'));
  });
});
