import { parseArgs } from 'node:util';
import { BenchUsageError } from './options.ts';

/**
 * The figures of the batch-settlement benchmark (bench/channels.ts) and how they print: kept apart
 * from the measuring code, which starts a chain and a gateway, so that they can be tested alone.
 */
export interface ChannelBenchOptions {
  /** Sequential requests of the one-client rows: exact, and one channel. */
  requests: number;
  /** Concurrent exact clients, each its own payer. */
  clients: number;
  /** Concurrent channels, each its own payer. */
  channels: number;
  /** Requests each concurrent client or channel makes. */
  perClient: number;
}

export const CHANNEL_BENCH_USAGE = 'usage: node --import tsx bench/channels.ts [--requests N] [--clients N] [--channels N] [--per-client N]';

/**
 * Each option's default and largest value. At most 200 channels: the claimer puts at most 200
 * channels in one claimWithSignature (payPerRequest.batchSettlement.maxChannelsPerClaim), and the
 * gas rows count one claim.
 */
const SIZES = { requests: [30, 10_000], clients: [10, 200], channels: [100, 200], 'per-client': [10, 1000] } as const;
type SizeName = keyof typeof SIZES;

/** Reads the command line of CHANNEL_BENCH_USAGE; throws BenchUsageError for a bad value. */
export function parseChannelBenchOptions(argv: string[]): ChannelBenchOptions {
  const names = Object.keys(SIZES) as SizeName[];
  const options = Object.fromEntries(names.map((name) => [name, { type: 'string' as const, default: String(SIZES[name][0]) }]));
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: argv, options }).values;
  } catch (err) {
    throw new BenchUsageError((err as Error).message);
  }
  const size = (name: SizeName) => {
    const raw = String(values[name]);
    const max = SIZES[name][1];
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max)
      throw new BenchUsageError(`--${name} must be a whole number from 1 to ${max}, got "${raw}"`);
    return Number(raw);
  };
  return { requests: size('requests'), clients: size('clients'), channels: size('channels'), perClient: size('per-client') };
}

/** Requests answered 200 in a span of wall time. */
export interface Throughput {
  requests: number;
  ms: number;
}

export const perSecond = (t: Throughput) => (t.requests * 1000) / t.ms;

/** Gas of the transactions that paid for `requests` requests, scaled to 1,000 requests (rounded down). */
export const gasPer1000 = (gas: bigint[], requests: number) => (gas.reduce((a, b) => a + b, 0n) * 1000n) / BigInt(requests);

/** The channel transactions of a session: its deposits, the claim covering its channels, the settle to the receiver. */
export interface ChannelGas {
  requests: number;
  deposits: bigint[];
  claim: bigint;
  settle: bigint;
}

export const channelTransactions = (g: ChannelGas) => [...g.deposits, g.claim, g.settle];

export interface ChannelBenchFigures {
  options: ChannelBenchOptions;
  exactSequential: Throughput;
  exactConcurrent: Throughput;
  /** The first request of each concurrent channel: the deposit through the relayer, then the request. */
  openChannels: Throughput;
  oneChannel: Throughput;
  manyChannels: Throughput;
  /** Gas of each exact settle seen (one a paid request). */
  exactSettles: bigint[];
  oneChannelGas: ChannelGas;
  manyChannelsGas: ChannelGas;
  /** os.loadavg() at the start and at the end of the run. */
  load: { start: number[]; end: number[] };
}

const load = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ');
const num = (n: bigint | number) => n.toLocaleString('en-US');

export function channelBenchLines(f: ChannelBenchFigures): string[] {
  const o = f.options;
  const rate = (name: string, t: Throughput) =>
    `  ${name.padEnd(52)} ${perSecond(t).toFixed(1).padStart(7)} req/s  (${t.requests} in ${(t.ms / 1000).toFixed(2)} s)`;
  const exactGas = f.exactSettles.reduce((a, b) => a + b, 0n) / BigInt(f.exactSettles.length);
  const gasRow = (name: string, g: ChannelGas) => {
    const txs = channelTransactions(g);
    const sum = txs.reduce((a, b) => a + b, 0n);
    return (
      `  ${name.padEnd(36)} ${txs.length} tx, ${num(sum)} gas for ${g.requests} requests (deposits ${num(g.deposits.reduce((a, b) => a + b, 0n))}, ` +
      `claim ${num(g.claim)}, settle ${num(g.settle)})`
    );
  };
  const one = f.oneChannelGas;
  const many = f.manyChannelsGas;
  return [
    `Batch-settlement channels against exact (instant upstream, anvil mining at once; load average ${load(f.load.start)} at start, ${load(f.load.end)} at end):`,
    rate('exact, one client, sequential', f.exactSequential),
    rate(`exact, ${o.clients} clients at once (${o.perClient} requests each)`, f.exactConcurrent),
    rate('one channel, sequential (after its deposit)', f.oneChannel),
    rate(`${o.channels} channels, first request each (with the deposit)`, f.openChannels),
    rate(`${o.channels} channels at once (${o.perClient} requests each)`, f.manyChannels),
    'Gas:',
    `  exact                                ${f.exactSettles.length} settles, ${num(exactGas)} gas each (mean): ${num(exactGas * 1000n)} per 1,000 requests`,
    gasRow('one channel', one),
    // One deposit and one cumulative claim whatever the number of requests: the session's gas is
    // what 1,000 requests on one channel cost, as long as the deposit covers them.
    `  one channel, 1,000 requests          ${num(channelTransactions(one).reduce((a, b) => a + b, 0n))} gas (the same transactions: one deposit, one cumulative claim)`,
    gasRow(`${o.channels} channels`, many),
    `  ${`${o.channels} channels, per 1,000 requests`.padEnd(36)} ${num(gasPer1000(channelTransactions(many), many.requests))} gas (${o.perClient} requests a channel)`,
  ];
}

/** Runs `work` over `items` with at most `limit` at a time; resolves when all are done, rejects on the first failure. */
export async function inPool<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
