import { parseArgs } from 'node:util';

export interface BenchOptions {
  seconds: number;
  rounds: number;
  streams: number;
  connections: number;
  /** Funded wallets (a key each) the PostgreSQL many-wallet rows spread their requests over. */
  wallets: number;
  quick: boolean;
}

/** Thrown for a command line the benchmark cannot run with; printed without a stack trace. */
export class BenchUsageError extends Error {}

export const BENCH_USAGE = 'usage: npm run bench -- [--quick] [--seconds N] [--rounds N] [--streams N] [--connections N] [--wallets N]';

/** Reads the command line described by BENCH_USAGE; throws BenchUsageError for a bad value. */
export function parseBenchOptions(argv: string[]): BenchOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        seconds: { type: 'string', default: '5' },
        rounds: { type: 'string', default: '2' },
        streams: { type: 'string', default: '2000' },
        connections: { type: 'string', default: '64' },
        wallets: { type: 'string', default: '100' },
        quick: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    throw new BenchUsageError((err as Error).message);
  }
  const count = (name: 'seconds' | 'rounds' | 'streams' | 'connections' | 'wallets', max: number, min = 1) => {
    const raw = values[name];
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max) throw new BenchUsageError(`--${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
    return n;
  };
  const options = {
    seconds: count('seconds', 600),
    rounds: count('rounds', 20),
    streams: count('streams', 10_000),
    connections: count('connections', 4096),
    // At least 2: the many-wallet rows stand beside the one-wallet rows. At most 1,000: each wallet
    // gets a key made over SIWE at start-up, and thousands would only slow the start.
    wallets: count('wallets', 1000, 2),
    quick: values.quick,
  };
  // --quick: a short look (under 5 minutes); its figures are noisier than a full run's.
  return values.quick ? { ...options, seconds: 2, rounds: 1, streams: 200 } : options;
}
