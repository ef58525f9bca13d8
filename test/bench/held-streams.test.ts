import assert from 'node:assert/strict';
import { test } from 'node:test';
import { perHeldStream, type HeldStreams } from '../../bench/load/held-streams.ts';

const phase = (open: number, rssLoadedBytes: number, heapLoadedBytes: number): HeldStreams => ({
  wanted: open,
  open,
  rssIdleBytes: 100_000_000,
  rssSamplesBytes: [rssLoadedBytes],
  rssAtOpenBytes: rssLoadedBytes,
  rssLoadedBytes,
  bytesPerStream: (rssLoadedBytes - 100_000_000) / open,
  heapIdleBytes: 40_000_000,
  heapLoadedBytes,
});

/**
 * One size over its idle figure charges each stream a share of what the burst costs once (here
 * 20 MB of RSS and 5 MB of heap that both sizes carry); the difference between two sizes does not.
 */
test('the memory per held stream is the difference between two sizes, without the fixed cost of a burst', () => {
  const smaller = phase(500, 100_000_000 + 20_000_000 + 500 * 25_000, 40_000_000 + 5_000_000 + 500 * 24_000);
  const larger = { ...phase(2000, 100_000_000 + 20_000_000 + 2000 * 25_000, 40_000_000 + 5_000_000 + 2000 * 24_000), smaller };
  assert.equal(perHeldStream(larger, 'rss'), 25_000);
  assert.equal(perHeldStream(larger, 'heap'), 24_000);
  assert.equal(larger.bytesPerStream, 35_000, 'one size over idle: 10 KB a stream of the burst at 2,000 streams');
  assert.equal(perHeldStream(smaller, 'rss'), 65_000, 'with one size only, over the idle figure');
});
