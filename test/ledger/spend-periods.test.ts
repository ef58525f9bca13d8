import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { DAY_MS, usageDay } from '../../src/ledger/days.ts';
import { bucketOf, bucketsAt, dayBucketOfDayNumber, periodResetsAt } from '../../src/ledger/spend-periods.ts';

/** The ledger's bucket arithmetic: which UTC day and month a reservation's spend counts in, and when each resets. */
describe('spend periods', () => {
  const at = (iso: string) => Date.parse(iso);

  test('a reservation counts in total, its UTC day and its UTC month', () => {
    assert.deepEqual(bucketsAt(at('2026-11-26T23:59:59.999Z')), ['total', 'day:2026-11-26', 'month:2026-11']);
    assert.deepEqual(bucketsAt(at('2026-11-27T00:00:00.000Z')), ['total', 'day:2026-11-27', 'month:2026-11']);
    // UTC, whatever the offset the instant was written with.
    assert.equal(bucketOf('day', at('2026-12-31T23:30:00-02:00')), 'day:2027-01-01');
    assert.equal(bucketOf('month', at('2026-12-31T23:30:00-02:00')), 'month:2027-01');
  });

  test('the remembered day never answers for another instant (any order of instants, a caller mutating its copy)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: Date.UTC(2200, 0, 1) }), { minLength: 1, maxLength: 20 }), (instants) => {
        for (const ms of instants) {
          const first = bucketsAt(ms);
          first[1] = 'day:tampered';
          assert.deepEqual(bucketsAt(ms + (ms % 1000)), ['total', bucketOf('day', ms + (ms % 1000)), bucketOf('month', ms + (ms % 1000))]);
        }
      }),
    );
  });

  test('a day resets at the next UTC midnight, a month at the first of the next month, total never', () => {
    assert.equal(periodResetsAt('day', at('2026-11-26T13:00:00Z')), at('2026-11-27T00:00:00Z'));
    assert.equal(periodResetsAt('month', at('2026-12-15T00:00:00Z')), at('2027-01-01T00:00:00Z'));
    assert.equal(periodResetsAt('month', at('2028-02-29T23:59:59Z')), at('2028-03-01T00:00:00Z'));
    assert.equal(periodResetsAt('total', at('2026-11-26T13:00:00Z')), null);
  });

  test('every instant lies before its period reset, and the reset instant is in the next bucket', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Date.UTC(2200, 0, 1) }), fc.constantFrom('day' as const, 'month' as const), (ms, period) => {
        const reset = periodResetsAt(period, ms)!;
        return ms < reset && bucketOf(period, reset - 1) === bucketOf(period, ms) && bucketOf(period, reset) !== bucketOf(period, ms);
      }),
    );
  });

  test('usage_daily day numbers and day buckets name the same UTC day', () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: Date.UTC(2200, 0, 1) }), (ms) => dayBucketOfDayNumber(usageDay(ms)) === bucketOf('day', ms)));
    assert.equal(usageDay(DAY_MS - 1), 0);
    assert.equal(usageDay(DAY_MS), 1);
  });
});
