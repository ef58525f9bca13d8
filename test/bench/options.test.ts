import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseBenchOptions } from '../../bench/options.ts';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

// Only the command line is tested here: the benchmark itself measures, and timings stay out of npm test.
describe('npm run bench options', () => {
  test('defaults, explicit values and --quick', () => {
    assert.deepEqual(parseBenchOptions([]), { seconds: 5, rounds: 2, streams: 2000, connections: 64, wallets: 100, quick: false });
    assert.deepEqual(parseBenchOptions(['--seconds', '10', '--streams', '500']), {
      seconds: 10,
      rounds: 2,
      streams: 500,
      connections: 64,
      wallets: 100,
      quick: false,
    });
    assert.deepEqual(parseBenchOptions(['--quick']), { seconds: 2, rounds: 1, streams: 200, connections: 64, wallets: 100, quick: true });
    assert.deepEqual(parseBenchOptions(['--quick', '--wallets', '20']), { seconds: 2, rounds: 1, streams: 200, connections: 64, wallets: 20, quick: true });
  });

  test('bad values are refused with the option named', () => {
    assert.throws(() => parseBenchOptions(['--seconds', 'abc']), /--seconds must be a whole number from 1 to 600, got "abc"/);
    assert.throws(() => parseBenchOptions(['--streams', '0']), /--streams must be a whole number from 1 to 10000, got "0"/);
    assert.throws(() => parseBenchOptions(['--rounds', '2.5']), /--rounds must be a whole number/);
    assert.throws(() => parseBenchOptions(['--connections', '99999']), /--connections must be a whole number from 1 to 4096/);
    assert.throws(() => parseBenchOptions(['--fast']), /Unknown option '--fast'/);
    // The many-wallet rows stand beside the one-wallet rows, so one wallet is refused; each wallet's key costs start-up time.
    assert.throws(() => parseBenchOptions(['--wallets', '1']), /--wallets must be a whole number from 2 to 1000, got "1"/);
    assert.throws(() => parseBenchOptions(['--wallets', '5000']), /--wallets must be a whole number from 2 to 1000, got "5000"/);
    assert.throws(() => parseBenchOptions(['--wallets', 'many']), /--wallets must be a whole number from 2 to 1000, got "many"/);
    assert.throws(() => parseBenchOptions(['--wallets']), /--wallets/);
  });

  test('npm run bench with a bad option exits 2 before starting anything', async () => {
    const run = promisify(execFile);
    const res = await run(process.execPath, ['--import', 'tsx', 'bench/run.ts', '--seconds', 'abc'], { env: { PATH: process.env.PATH } }).then(
      () => ({ code: 0, stderr: '' }),
      (err: { code: number; stderr: string }) => err,
    );
    assert.equal(res.code, 2);
    assert.match(res.stderr, /^bench: --seconds must be a whole number from 1 to 600, got "abc"\nusage: npm run bench -- .*\[--wallets N\]/);
    assert.doesNotMatch(res.stderr, /starting the upstream/);
  });
});
