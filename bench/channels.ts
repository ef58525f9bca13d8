/**
 * Pay-per-request with x402 batch-settlement channels against `exact`, in one run on one gateway:
 * requests per second (exact sequential and with concurrent clients, one channel, many channels at
 * once) and the gas the payments cost, from the transactions' receipts. Alone:
 * `node --import tsx bench/channels.ts` (CHANNEL_BENCH_USAGE in bench/channels-figures.ts).
 *
 * Every payer is a stock client: `@x402/fetch` with `@x402/evm`'s exact or batch-settlement scheme.
 * The chain is a local anvil that mines each transaction at once: on a public chain every exact
 * request also waits for its block (about 2 s on Base), a channel request waits for none.
 */
import { loadavg, tmpdir } from 'node:os';
import { decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import type { Hex } from 'viem';
import type { FundedAccount } from '../src/devchain/deploy.ts';
import { CLAIM_LEASE, runClaimPass } from '../src/payments/channels/claims/claim-pass.ts';
import { namedLease } from '../src/retention/job-lease.ts';
import { BenchUsageError } from './options.ts';
import { exactClient, withPayingBench, type PayingBench } from './pay-per-request.ts';
import {
  channelBenchLines,
  CHANNEL_BENCH_USAGE,
  inPool,
  parseChannelBenchOptions,
  type ChannelBenchFigures,
  type ChannelBenchOptions,
  type ChannelGas,
  type Throughput,
} from './channels-figures.ts';

/**
 * Channels on, with the gateway's own claimer at its longest period so that only the benchmark's
 * claim pass runs, and room for every channel in one claimWithSignature.
 */
const CHANNELS = { batchSettlement: { enabled: true, withdrawDelaySeconds: 900, minDepositUsd: 1, claimIntervalSeconds: 300, maxChannelsPerClaim: 200 } };
/** Channels opened at once: each opening is a deposit through the relayer, whose queue holds 64 sends (topup.relayer.maxQueuedSends). */
const OPENING_AT_ONCE = 32;
const USDC = 1_000_000n;

type Pay = (b: PayingBench) => Promise<Response>;

/** One paid request by a stock client; its answer must be 200. */
function payer(client: x402Client): Pay {
  const paying = wrapFetchWithPayment(fetch, client);
  return async ({ url, body }) => {
    const res = await paying(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`a paid request was answered ${res.status}: ${text.slice(0, 300)}`);
    return res;
  };
}

/** The stock batch-settlement client of `account`, taking the USDC (EIP-3009) channel offer. */
function channelClient(b: PayingBench, account: FundedAccount): x402Client {
  const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, b.chain.client(account)));
  const usdcChannel = (_version: number, accepts: PaymentRequirements[]) =>
    accepts.find((r) => r.scheme === 'batch-settlement' && r.asset.toLowerCase() === b.chain.usdc.toLowerCase()) ?? accepts[0]!;
  const client = new x402Client(usdcChannel).register('eip155:*', scheme);
  client.setSpendControls({ maxAmountPerPayment: '$1', allowedAssets: [{ network: b.chain.network, asset: b.chain.usdc, maxAmountPerPayment: '1000000' }] });
  return client;
}

/** Each of `pays` makes `each` requests one after another, all of them at once; `seen` gets every answer. */
async function timed(b: PayingBench, pays: Pay[], each: number, seen: (res: Response) => void = () => {}): Promise<Throughput> {
  const t = performance.now();
  await Promise.all(
    pays.map(async (pay) => {
      for (let i = 0; i < each; i++) seen(await pay(b));
    }),
  );
  return { requests: pays.length * each, ms: performance.now() - t };
}

const receiptGas = async (b: PayingBench, hash: string) =>
  (await b.gw.services.topup!.clientFor(b.chain.network)!.getTransactionReceipt({ hash: hash as Hex })).gasUsed;

/** The gas of the settle transaction each exact answer names. */
function settleGasOf(b: PayingBench, answers: Response[]): Promise<bigint[]> {
  return Promise.all(answers.map((res) => receiptGas(b, decodePaymentResponseHeader(res.headers.get('payment-response')!).transaction)));
}

/** The deposits into the channels of `payers`, then one forced claim pass (claim and settle), with each transaction's gas. */
async function claimSession(b: PayingBench, payers: FundedAccount[], requests: number): Promise<ChannelGas> {
  const { storage, topup, config } = b.gw.services;
  const db = storage.db;
  const deposits = await db
    .selectFrom('channel_transfers')
    .innerJoin('channels', 'channels.channel_id', 'channel_transfers.channel_id')
    .select('channel_transfers.tx_hash')
    .where('channel_transfers.kind', '=', 'deposit')
    .where(
      'channels.payer',
      'in',
      payers.map((p) => p.address.toLowerCase()),
    )
    .execute();
  const quiet = { info: () => {}, warn: (obj: object, msg: string) => process.stderr.write(`${msg} ${JSON.stringify(obj)}\n`) };
  const pass = await runClaimPass(
    {
      db,
      lease: namedLease(db, CLAIM_LEASE),
      facilitator: topup!.facilitator,
      clientFor: (network) => topup!.clientFor(network),
      config: config.payPerRequest.batchSettlement,
      logger: quiet,
      now: Date.now,
    },
    { holder: 'bench', force: true },
  );
  if (pass.claims.length !== 1 || pass.settles.length !== 1 || pass.failures.length > 0)
    throw new Error(`expected one claim and one settle, got ${JSON.stringify(pass)}`);
  if (pass.claims[0]!.channels.length !== payers.length) throw new Error(`the claim covered ${pass.claims[0]!.channels.length} channels, not ${payers.length}`);
  await namedLease(db, CLAIM_LEASE).release('bench');
  return {
    requests,
    deposits: await Promise.all(deposits.map((d) => receiptGas(b, d.tx_hash))),
    claim: await receiptGas(b, pass.claims[0]!.transaction),
    settle: await receiptGas(b, pass.settles[0]!),
  };
}

/** Payers with 1,000 USDC: exact pays at least payPerRequest.minUsd ($0.01) a request, so 10 USDC ran out within a 1,000-request run. */
const funded = async (b: PayingBench, n: number) => {
  const accounts: FundedAccount[] = [];
  for (let i = 0; i < n; i++) accounts.push(await b.chain.newAccount({ usdc: 1000n * USDC }));
  return accounts;
};

export async function measureChannels(dir: string, o: ChannelBenchOptions): Promise<ChannelBenchFigures> {
  const start = loadavg();
  return withPayingBench(dir, CHANNELS, async (b) => {
    // exact: one client, after three warm-up requests; then `clients` payers at once.
    const exactPayer = payer(exactClient(b.chain, (await funded(b, 1))[0]!));
    for (let i = 0; i < 3; i++) await exactPayer(b);
    const exactAnswers: Response[] = [];
    const exactSequential = await timed(b, [exactPayer], o.requests, (r) => exactAnswers.push(r));
    const exactPayers = (await funded(b, o.clients)).map((a) => payer(exactClient(b.chain, a)));
    const exactConcurrent = await timed(b, exactPayers, o.perClient);
    const exactSettles = await settleGasOf(b, exactAnswers);

    // One channel: its first request opens it (the deposit), then `requests` one after another.
    const [oneAccount] = await funded(b, 1);
    const onePayer = payer(channelClient(b, oneAccount!));
    await onePayer(b);
    const oneChannel = await timed(b, [onePayer], o.requests);
    const oneChannelGas = await claimSession(b, [oneAccount!], o.requests + 1);

    // Many channels, each its own payer: opened (deposits through the relayer), then all at once.
    const accounts = await funded(b, o.channels);
    const pays = accounts.map((a) => payer(channelClient(b, a)));
    const t = performance.now();
    await inPool(pays, OPENING_AT_ONCE, async (pay) => void (await pay(b)));
    const openChannels = { requests: pays.length, ms: performance.now() - t };
    const manyChannels = await timed(b, pays, o.perClient);
    const manyChannelsGas = await claimSession(b, accounts, o.channels * (o.perClient + 1));
    return {
      options: o,
      exactSequential,
      exactConcurrent,
      openChannels,
      oneChannel,
      manyChannels,
      exactSettles,
      oneChannelGas,
      manyChannelsGas,
      load: { start, end: loadavg() },
    };
  });
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { join } = await import('node:path');
  let options: ChannelBenchOptions;
  try {
    options = parseChannelBenchOptions(process.argv.slice(2));
  } catch (err) {
    if (!(err instanceof BenchUsageError)) throw err;
    process.stderr.write(`${err.message}\n${CHANNEL_BENCH_USAGE}\n`);
    process.exit(2);
  }
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-bench-channels-'));
  try {
    process.stdout.write(`${channelBenchLines(await measureChannels(dir, options)).join('\n')}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
