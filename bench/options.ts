import { parseArgs } from 'node:util';

export interface BenchOptions {
  seconds: number;
  rounds: number;
  streams: number;
  connections: number;
}

/** Thrown for a command line the benchmark cannot run with; printed without a stack trace. */
export class BenchUsageError extends Error {}

/** `npm run bench -- [--quick] [--seconds N] [--rounds N] [--streams N] [--connections N]`. */
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
        quick: { type: 'boolean', default: false },
      },
    }));
  } catch (err) {
    throw new BenchUsageError((err as Error).message);
  }
  const count = (name: 'seconds' | 'rounds' | 'streams' | 'connections', max: number) => {
    const raw = values[name];
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < 1 || n > max) throw new BenchUsageError(`--${name} must be a whole number from 1 to ${max}, got "${raw}"`);
    return n;
  };
  const options = { seconds: count('seconds', 600), rounds: count('rounds', 20), streams: count('streams', 10_000), connections: count('connections', 4096) };
  // --quick: a short look (about 2.5 minutes); its figures are noisier than a full run's.
  return values.quick ? { ...options, seconds: 2, rounds: 1, streams: 200 } : options;
}
