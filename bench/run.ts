import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import type { PostgresServer } from '../test/support/postgres.ts';
import { BENCH_USAGE, BenchUsageError, parseBenchOptions, type BenchOptions } from './options.ts';
import type { Saturation } from './load/closed-loop.ts';
import type { HeldStreams } from './load/held-streams.ts';
import type { OpenLoop } from './load/open-loop.ts';
import { ensureBenchPackages } from './packages.ts';
import { reportText, type Report } from './report.ts';
import { measureStartup } from './startup.ts';
import { heapProbe, type HeapProbe } from './heap-probe-client.ts';
import { measurePayPerRequest } from './pay-per-request.ts';
import { cpuMicros, postgresCpuMicros } from './proc.ts';
import { redisCounts } from './redis-counts.ts';
import { FULL_SIZES, measureStorage, QUICK_SIZES } from './storage-case.ts';
import { runScript } from './script.ts';
import type { Target } from './targets.ts';
import type { TollgateDeployment } from './tollgate-target.ts';

/**
 * `npm run bench`: every target side by side in one run, phases alternating between targets, all
 * on 127.0.0.1, every process stopped at the end (also on Ctrl-C or a failure).
 */
let options: BenchOptions;
try {
  options = parseBenchOptions(process.argv.slice(2));
} catch (err) {
  if (!(err instanceof BenchUsageError)) throw err;
  process.stderr.write(`bench: ${err.message}\n${BENCH_USAGE}\n`);
  process.exit(2);
}
const { seconds: SECONDS, rounds: ROUNDS, streams: STREAMS, connections: CONNECTIONS, wallets: WALLETS, quick: QUICK } = options;
const RATES = [200, 1000];
// The pause before each open-loop phase (see there); a quick run halves it to stay under 5 minutes.
const SETTLE_MS = QUICK ? 1000 : 2000;

const started = Date.now();
const loadAtStart = loadavg();
const log = (text: string) => process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${text}\n`);

await runScript('benchmark', async ({ dir, onStop }) => {
  ensureBenchPackages(log);
  // Loaded after the install above: they import autocannon and start Portkey from bench/node_modules.
  const { startPostgres } = await import('../test/support/postgres.ts');
  const { ledgerOpsPerSecond } = await import('./ledger.ts');
  const { saturate } = await import('./load/closed-loop.ts');
  const { holdStreams } = await import('./load/held-streams.ts');
  const { openLoopInOwnProcess } = await import('./load/open-loop-process.ts');
  const { startRedis } = await import('../test/support/redis.ts');
  const { startTollgate } = await import('./tollgate-target.ts');
  const { EVENTS_PER_STREAM } = await import('./load/request.ts');
  const { directTarget, portkey, referenceProxy, startUpstream } = await import('./targets.ts');

  // First, on a quiet machine: how fast the shipped command starts and how much it holds idle.
  log('start-up: tollgate --help, time to /health, idle RSS');
  const startup = await measureStartup(dir, QUICK ? 3 : 5);
  log('pay-per-request: a keyed request against an x402 paid one, on a local chain');
  const payPerRequest = await measurePayPerRequest(dir, ROUNDS > 1 ? 30 : 10);

  log('starting the upstream, the reference proxy, Portkey, Redis, and Tollgate on SQLite and on PostgreSQL (one instance and two)');
  const upstream = await startUpstream();
  onStop(upstream.stop);
  const pg: PostgresServer = await startPostgres();
  onStop(pg.stop);
  const redis = await startRedis();
  onStop(redis.stop);
  const targets: Target[] = [directTarget(upstream)];
  const add = async (t: Promise<Target>) => {
    const target = await t;
    onStop(target.stop);
    targets.push(target);
    return target;
  };
  // The one-instance deployments and the proxy can be asked for their memory after a forced
  // collection (the held-stream phase); the probe only listens for a signal until then.
  const probeOf = (name: string) => heapProbe(dir, name);
  const deploy = async (o: { databaseUrl: string; instances: number; wallets: number; redisUrl?: string; probe?: HeapProbe }) => {
    const deployment = await startTollgate({ upstreamUrl: upstream.url, ...o, nodeArgs: o.probe?.nodeArgs, env: o.probe?.env });
    onStop(deployment.stop);
    return deployment;
  };
  const reference = await add(referenceProxy(upstream.url, probeOf('proxy')));
  await add(portkey(upstream.url));
  const sqliteProbe = probeOf('sqlite');
  const sqlite = await deploy({ databaseUrl: `sqlite:${join(dir, 'tollgate.db')}`, instances: 1, wallets: 1, probe: sqliteProbe });
  log(`funding ${WALLETS} wallets with a key each, on one PostgreSQL instance and on two`);
  const pgOneProbe = probeOf('pg-one');
  const pgOne = await deploy({ databaseUrl: await pg.database(), instances: 1, wallets: WALLETS, probe: pgOneProbe });
  const pgTwo = await deploy({ databaseUrl: await pg.database(), instances: 2, wallets: WALLETS, redisUrl: redis.url });
  // Every phase for SQLite and PostgreSQL with one wallet (the rows of earlier runs); JSON only for
  // the scale-out rows, which answer the operators' question (throughput, CPU, latency) in fewer minutes.
  // The database server's CPU (and for two instances Redis's) is measured beside each PostgreSQL row's own.
  const { pid: redisPid } = await redisCounts(redis.url);
  const postgresCpu = () => postgresCpuMicros(pg.port);
  const sharedCpu = () => postgresCpu() + cpuMicros(redisPid);
  const probed = (d: TollgateDeployment, probe: HeapProbe) => () => probe.measure(d.instances[0]!.child.pid!);
  const tollgateRows = [
    { ...sqlite.row(1), probeMemory: probed(sqlite, sqliteProbe) },
    { ...pgOne.row(1), serverCpuMicros: postgresCpu, probeMemory: probed(pgOne, pgOneProbe) },
  ];
  const scaleOutRows = [
    { ...pgOne.row(WALLETS), serverCpuMicros: postgresCpu },
    { ...pgTwo.row(1), serverCpuMicros: sharedCpu },
    { ...pgTwo.row(WALLETS), serverCpuMicros: sharedCpu },
  ];
  for (const row of [...tollgateRows, ...scaleOutRows]) targets.push(row);
  const scaleOutNames = new Set(scaleOutRows.map((t) => t.name));
  const full = targets.filter((t) => !scaleOutNames.has(t.name));

  log('warming up every target');
  for (const t of targets) await saturate(t, { model: 'bench-fast', stream: false, seconds: 1, connections: CONNECTIONS });

  // Memory first, while each heap is still small: later phases leave garbage whose collection
  // would shrink the resident size under the measurement.
  // At two sizes: the difference per stream between them is what one more held stream costs,
  // without the fixed costs of a burst (pools, compiled code, the allocator's first pages).
  const memory: Record<string, HeldStreams> = {};
  const fewer = Math.max(1, Math.round(STREAMS / 4));
  for (const t of full.slice(1)) {
    log(`${fewer} then ${STREAMS} concurrent slow streams: ${t.name}`);
    const smaller = await holdStreams(t, fewer);
    memory[t.name] = { ...(await holdStreams(t, STREAMS)), smaller };
  }

  const saturation: Record<string, { json: Saturation[]; stream: Saturation[] }> = {};
  for (const t of targets) saturation[t.name] = { json: [], stream: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    for (const stream of [false, true]) {
      for (const t of stream ? full : targets) {
        log(`saturation ${stream ? 'stream' : 'JSON'}, round ${round}/${ROUNDS}: ${t.name}`);
        saturation[t.name]![stream ? 'stream' : 'json'].push(await saturate(t, { model: 'bench-fast', stream, seconds: SECONDS, connections: CONNECTIONS }));
      }
    }
  }

  const latency: Record<string, Record<string, OpenLoop>> = {};
  for (const t of targets) latency[t.name] = {};
  for (const rate of RATES) {
    for (const stream of [false, true]) {
      for (const t of stream ? full : targets) {
        log(`open loop ${rate} req/s ${stream ? 'stream (TTFT)' : 'JSON'}: ${t.name}`);
        // A pause first: a target saturated by the phase before (Portkey and PostgreSQL are, at
        // 1,000/s) can still be collecting garbage, and that would be charged to the next one.
        await new Promise((r) => setTimeout(r, SETTLE_MS));
        const phase = await openLoopInOwnProcess(t, { rate, seconds: SECONDS, model: stream ? 'bench-paced' : 'bench-fast', stream });
        latency[t.name]![`${stream ? 'ttft' : 'json'}@${rate}`] = phase;
        if (!phase.keptSchedule)
          log(`  the load generator fell short: sent ${phase.achievedRate.toFixed(0)} of ${rate} req/s, p99 ${phase.sendLagP99.toFixed(2)} ms late`);
      }
    }
  }

  const ledger: Record<string, number> = {};
  log('ledger reserve+settle on SQLite');
  ledger.sqlite = await ledgerOpsPerSecond(`sqlite:${join(dir, 'ledger.db')}`, { seconds: SECONDS, concurrency: 16 });
  log('ledger reserve+settle on PostgreSQL');
  ledger.postgres = await ledgerOpsPerSecond(await pg.database(), { seconds: SECONDS, concurrency: 16 });
  const storage = await measureStorage(dir, QUICK ? QUICK_SIZES : FULL_SIZES, log);

  const report: Report = {
    date: new Date().toISOString(),
    machine: {
      cpu: cpus()[0]?.model ?? 'unknown',
      cores: cpus().length,
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      kernel: release(),
      node: process.version,
    },
    settings: {
      seconds: SECONDS,
      rounds: ROUNDS,
      connections: CONNECTIONS,
      rates: RATES,
      streams: STREAMS,
      eventsPerStream: EVENTS_PER_STREAM,
      wallets: WALLETS,
      quick: QUICK,
    },
    loadAverage: { start: loadAtStart, end: loadavg() },
    reference: reference.name,
    targets: targets.map((t) => t.name),
    scaleOut: scaleOutRows.map((t) => t.name),
    rows: Object.fromEntries([...tollgateRows, ...scaleOutRows].map((t) => [t.name, t.condition])),
    saturation,
    latency,
    memory,
    ledger,
    startup,
    payPerRequest,
    storage,
    durationSeconds: (Date.now() - started) / 1000,
  };
  const out = join(import.meta.dirname, 'results');
  mkdirSync(out, { recursive: true });
  const json = JSON.stringify(report, null, 2);
  writeFileSync(join(out, `${report.date.replace(/[:.]/g, '-')}.json`), json);
  // latest.json is the last full run, which bench/README.md cites; a quick look must not replace it.
  const latest = QUICK ? 'latest-quick.json' : 'latest.json';
  writeFileSync(join(out, latest), json);
  process.stdout.write(reportText(report));
  log(`done; results in bench/results/${latest}`);
});
