import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { median } from '../../bench/median.ts';
import { parseHistorySizes, projectDay } from '../../bench/storage-case.ts';

// The incremental ledger-check's projection (bench/storage-case.ts), on made-up timings: the bench
// measures, npm test checks the arithmetic the MET / MISSED line stands on.
const at = (olderRequests: number, ms: number, newRequests = 61_000) => ({ olderRequests, newRequests, ms });

describe('the incremental ledger-check projection', () => {
  test('the slope is the least-squares line through every history, not the two ends', () => {
    // The ends alone say 30 ms over 0.9 M older (33.3 ms per million); the line through all three,
    // least squares by hand: Σ(x − x̄)(y − ȳ) / Σ(x − x̄)² = 12,000 / 420,000 per thousand = 28.6 ms per million.
    const p = projectDay([at(160_000, 235), at(460_000, 265), at(1_060_000, 265)]);
    assert.equal(p.perMillionOlderMs.toFixed(1), '28.6');
    assert.equal(Math.round(p.dayMs), Math.round(265 + 28.5714 * (96.4 - 0.061 - 1.06)));
    const flat = projectDay([at(160_000, 250), at(460_000, 240), at(1_060_000, 250)]);
    assert.ok(flat.perMillionOlderMs < 5, `a flat history projects flat: ${flat.perMillionOlderMs}`);
    assert.ok(flat.dayMs < 1000);
    assert.match(flat.rule, /the slope through 3 histories: 250 ms on 0\.16 M, 240 ms on 0\.46 M, 250 ms on 1\.06 M/);
  });

  test("a falling line counts as no growth, and the day is the largest history's own time", () => {
    const p = projectDay([at(160_000, 261), at(460_000, 255), at(1_060_000, 246)]);
    assert.equal(p.perMillionOlderMs, 0);
    assert.equal(p.dayMs, 246);
  });

  test("each history is scaled to the largest one's tail before the line is drawn", () => {
    // The same 4 µs per new request everywhere, over tails 2% apart: no growth with history.
    const p = projectDay([at(160_000, 4 * 59_800, 59_800), at(460_000, 4 * 60_400, 60_400), at(1_060_000, 4 * 61_000, 61_000)]);
    assert.ok(Math.abs(p.perMillionOlderMs) < 1e-9, `${p.perMillionOlderMs}`);
    assert.equal(p.dayMs, 4 * 61_000);
  });

  test('one history cannot make a line', () => {
    assert.throws(() => projectDay([at(1_060_000, 250)]), /at least two histories/);
  });

  test('--older: the history sizes given, or a refusal that says what it wants', () => {
    assert.deepEqual(parseHistorySizes('100000,1000000,10000000'), [100_000, 1_000_000, 10_000_000]);
    for (const bad of ['1000000', '100000,', 'a,b', '100000,500', '100000,1.5e5.5', '100000,-2000', '100000,2500.5', '']) {
      assert.throws(() => parseHistorySizes(bad), /at least two history sizes, whole numbers of requests of at least 1,000/, bad);
    }
  });

  test('the median of an even count is the mean of the middle two, non-finite values left out', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.equal(median([Number.NaN, 5, 7]), 6);
    assert.ok(Number.isNaN(median([])));
  });
});
