import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { channelBenchLines, gasPer1000, inPool, parseChannelBenchOptions, perSecond, type ChannelBenchFigures } from '../../bench/channels-figures.ts';

// The batch-settlement benchmark's arithmetic, command line and table; the measuring itself stays out of npm test.
describe('bench/channels figures', () => {
  test('options: short defaults, explicit sizes, bad values refused with the option named', () => {
    assert.deepEqual(parseChannelBenchOptions([]), { requests: 30, clients: 10, channels: 100, perClient: 10 });
    assert.deepEqual(parseChannelBenchOptions(['--requests', '1000', '--channels', '200', '--per-client', '3', '--clients', '50']), {
      requests: 1000,
      clients: 50,
      channels: 200,
      perClient: 3,
    });
    assert.throws(() => parseChannelBenchOptions(['--channels', '201']), /--channels must be a whole number from 1 to 200, got "201"/);
    assert.throws(() => parseChannelBenchOptions(['--requests', '0']), /--requests must be a whole number from 1 to 10000/);
    assert.throws(() => parseChannelBenchOptions(['--per-client', '1.5']), /--per-client must be a whole number/);
    assert.throws(() => parseChannelBenchOptions(['--fast']), /Unknown option '--fast'/);
  });

  test('requests per second and gas per 1,000 requests', () => {
    assert.equal(perSecond({ requests: 50, ms: 2000 }), 25);
    assert.equal(gasPer1000([100_000n, 50_000n, 30_000n], 600), 300_000n);
    assert.equal(gasPer1000([85_000n], 1), 85_000_000n, 'one settle a request: a thousand settles');
    assert.equal(gasPer1000([1000n], 3), 333_333n, 'rounded down');
  });

  test('the table names each row with its figures and the load average', () => {
    const figures: ChannelBenchFigures = {
      options: { requests: 30, clients: 10, channels: 100, perClient: 10 },
      exactSequential: { requests: 30, ms: 1500 },
      exactConcurrent: { requests: 100, ms: 4000 },
      openChannels: { requests: 100, ms: 5000 },
      oneChannel: { requests: 30, ms: 500 },
      manyChannels: { requests: 1000, ms: 10_000 },
      exactSettles: [85_000n, 86_000n],
      oneChannelGas: { requests: 31, deposits: [180_000n], claim: 75_000n, settle: 59_000n },
      manyChannelsGas: { requests: 1100, deposits: Array(100).fill(125_000n), claim: 2_000_000n, settle: 59_000n },
      load: { start: [4.5, 3, 2], end: [5, 4, 3] },
    };
    const lines = channelBenchLines(figures).join('\n');
    assert.match(lines, /load average 4\.50 3\.00 2\.00 at start, 5\.00 4\.00 3\.00 at end/);
    assert.match(lines, /exact, one client, sequential +20\.0 req\/s +\(30 in 1\.50 s\)/);
    assert.match(lines, /exact, 10 clients at once \(10 requests each\) +25\.0 req\/s/);
    assert.match(lines, /one channel, sequential \(after its deposit\) +60\.0 req\/s/);
    assert.match(lines, /100 channels at once \(10 requests each\) +100\.0 req\/s/);
    assert.match(lines, /2 settles, 85,500 gas each \(mean\): 85,500,000 per 1,000 requests/);
    assert.match(lines, /one channel +3 tx, 314,000 gas for 31 requests \(deposits 180,000, claim 75,000, settle 59,000\)/);
    assert.match(lines, /100 channels +102 tx, 14,559,000 gas for 1100 requests/);
    assert.match(lines, /100 channels, per 1,000 requests +13,235,454 gas \(10 requests a channel\)/);
  });

  test('inPool runs at most `limit` at once and every item once', async () => {
    let running = 0;
    let most = 0;
    const done: number[] = [];
    await inPool([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setImmediate(resolve));
      done.push(n);
      running--;
    });
    assert.equal(most, 3);
    assert.deepEqual(
      done.sort((a, b) => a - b),
      [1, 2, 3, 4, 5, 6, 7],
    );
    await assert.rejects(
      inPool([1, 2], 2, async (n) => {
        if (n === 2) throw new Error('no');
      }),
      /no/,
    );
  });
});
