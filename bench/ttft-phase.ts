import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { percentile, type OpenLoop } from './load/open-loop.ts';
import { openLoopInOwnProcess } from './load/open-loop-process.ts';
import { ensureBenchPackages } from './packages.ts';
import { probeLines, type ProbeWindow } from './probe-report.ts';
import { summarise, summaryLines, type CpuProfile, type Window } from './profile-summary.ts';
import { runScript } from './script.ts';
import { referenceProxy, startUpstream, type Target } from './targets.ts';
import { ledgerStatementStats, type LedgerStatementStats } from './pg-statement-stats.ts';
import { startTollgate, type TollgateDeployment } from './tollgate-target.ts';

/**
 * One open-loop phase of the benchmark (by default time to first token at 1,000 streams/s), for
 * the reference proxy and one or more Tollgate trees on one engine, interleaved: proxy, tree A,
 * tree B, then again, `--pairs` times, each phase after the benchmark's 2 s pause, each line with
 * the load average. An A/B on a shared machine: a single run is noise, alternating is not.
 * `--tree NAME=DIR[@FLAGS]` names a checkout to run, with node flags if given (repeatable; default
 * this one); `--probe` preloads
 * bench/gateway-probe.mjs and --cpu-prof into every gateway and prints what each saw in the phase.
 * `--pg-stats` (PostgreSQL): the server's own time for the ledger's statements in each gateway's
 * phase (pg_stat_statements), beside the batches the probe saw.
 * Usage: node --import tsx bench/ttft-phase.ts --engine sqlite|postgres [--kind ttft|json] [--rate 1000]
 *          [--seconds 5] [--pairs 3] [--wallets 1] [--tree before=/tmp/before --tree after=.] [--probe] [--pg-stats]
 */
const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite' },
    kind: { type: 'string', default: 'ttft' },
    rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '5' },
    pairs: { type: 'string', default: '3' },
    wallets: { type: 'string', default: '1' },
    tree: { type: 'string', multiple: true },
    probe: { type: 'boolean', default: false },
    'pg-stats': { type: 'boolean', default: false },
  },
});
if (values.engine !== 'sqlite' && values.engine !== 'postgres') throw new Error('--engine must be sqlite or postgres');
if (values.kind !== 'ttft' && values.kind !== 'json') throw new Error('--kind must be ttft or json');
const ROOT = join(import.meta.dirname, '..');
const trees = (values.tree ?? ['this=.']).map((t) => {
  // NAME=DIR[@NODE FLAGS]: the flags (space-separated) go to that tree's node, as an operator's NODE_OPTIONS would.
  const [spec, flags] = t.includes('@') ? [t.slice(0, t.indexOf('@')), t.slice(t.indexOf('@') + 1)] : [t, ''];
  const [name, dir] = spec.includes('=') ? [spec.slice(0, spec.indexOf('=')), spec.slice(spec.indexOf('=') + 1)] : [spec, spec];
  const root = resolve(ROOT, dir!);
  if (!existsSync(join(root, 'bin', 'tollgate.mjs'))) throw new Error(`--tree ${t}: no bin/tollgate.mjs in ${root}`);
  return { name: name!, root, nodeFlags: flags.split(' ').filter(Boolean) };
});
const stream = values.kind === 'ttft';
const phase = { rate: Number(values.rate), seconds: Number(values.seconds), model: stream ? 'bench-paced' : 'bench-fast', stream };
const SETTLE_MS = 2000;
const wallets = Number(values.wallets);

const fmt = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '–' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One phase's line: the distribution from the schedule, its ratios to the proxy's, and what the machine was doing. */
function line(pair: number, name: string, l: OpenLoop, proxy: OpenLoop | undefined, load: number): string {
  const ratio = (a: number, b: number | undefined) => (b ? `${(a / b).toFixed(1)}×` : '');
  return [
    `${pair}`.padEnd(3),
    name.padEnd(12),
    ...[l.p50, l.p90, l.p99, l.p999, l.max].map((x) => fmt(x).padStart(7)),
    ratio(l.p50, proxy?.p50).padStart(7),
    ratio(l.p99, proxy?.p99).padStart(7),
    `${l.failed}`.padStart(5),
    fmt(l.sendLagP99).padStart(6),
    fmt(l.targetCpuShare).padStart(6),
    fmt(l.machineBusyCores).padStart(6),
    load.toFixed(2).padStart(6),
  ].join(' ');
}

/** Where each stretch of the slowest 1% sat in the phase: the scheduled second of each, counted. */
function slowestInTime(l: OpenLoop): string {
  const bySecond = new Map<number, number>();
  for (const s of l.slowest) bySecond.set(Math.floor(s.atMs / 1000), (bySecond.get(Math.floor(s.atMs / 1000)) ?? 0) + 1);
  const clusters = [...bySecond].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}s:${n}`);
  const ms = l.slowest.map((s) => s.ms).sort((a, b) => a - b);
  type Slow = Required<OpenLoop['slowest'][number]>;
  const mean = (f: (s: Slow) => number) => fmt(l.slowest.reduce((sum, s) => sum + f(s as Slow), 0) / l.slowest.length);
  return (
    `    slowest 1% (${l.slowest.length}, ${fmt(ms[0])}–${fmt(ms.at(-1))} ms) by scheduled second: ${clusters.join(' ')}\n` +
    `      their mean ms, seen by the generator: sent late ${mean((s) => s.sendLagMs)}, sent to on a socket ${mean((s) => s.onSocketMs - s.sendLagMs)} (${l.slowest.filter((s) => s.newSocket).length} on a new connection), on a socket to response headers ${mean((s) => s.headersMs - s.onSocketMs)}, headers to first token ${mean((s) => s.ms - s.headersMs)}`
  );
}

await runScript('ttft-phase', async ({ dir, onStop }) => {
  ensureBenchPackages((text) => process.stderr.write(`${text}\n`));
  // After the install above: autocannon lives in bench/node_modules.
  const { saturate } = await import('./load/closed-loop.ts');
  const upstream = await startUpstream();
  onStop(upstream.stop);
  const proxy = await referenceProxy(upstream.url);
  onStop(proxy.stop);
  let database = (name: string) => Promise.resolve(`sqlite:${join(dir, `${name}.db`)}`);
  if (values.engine === 'postgres') {
    const { startPostgres } = await import('../test/support/postgres.ts');
    const server = await startPostgres(values['pg-stats'] ? { shared_preload_libraries: 'pg_stat_statements' } : {});
    onStop(server.stop);
    database = () => server.database();
  }
  const profiles = join(dir, 'profiles');
  const gateways: Array<{ name: string; deployment: TollgateDeployment; target: Target; probeFile: string; windows: Window[]; stats?: LedgerStatementStats }> =
    [];
  for (const tree of trees) {
    const databaseUrl = await database(tree.name);
    const stats = values['pg-stats'] && values.engine === 'postgres' ? await ledgerStatementStats(databaseUrl) : undefined;
    if (stats) onStop(stats.close);
    const probeFile = join(dir, `probe-${tree.name}.json`);
    const probe = values.probe ? ['--import', join(ROOT, 'bench', 'gateway-probe.mjs'), '--cpu-prof', `--cpu-prof-dir=${join(profiles, tree.name)}`] : [];
    const nodeArgs = [...tree.nodeFlags, ...probe];
    const deployment = await startTollgate({
      upstreamUrl: upstream.url,
      databaseUrl,
      instances: 1,
      wallets,
      nodeArgs,
      root: tree.root,
      env: values.probe ? { TOLLGATE_PROBE_OUT: probeFile } : {},
    });
    onStop(deployment.stop);
    const row = deployment.row(wallets);
    gateways.push({ name: tree.name, deployment, target: { ...row, name: `${row.name} (${tree.name})` }, probeFile, windows: [], stats });
  }
  for (const t of [proxy, ...gateways.map((g) => g.target)]) await saturate(t, { model: 'bench-fast', stream: false, seconds: 1, connections: 64 });

  const what = `${stream ? 'time to first token' : 'JSON latency'} at ${phase.rate} ${stream ? 'streams' : 'req'}/s, ${phase.seconds} s a phase, ${values.engine}, ${wallets} wallet(s)`;
  process.stdout.write(`${what}; ms from the scheduled send; ratios to the proxy's phase in the same pair\n`);
  process.stdout.write(`pair target        p50     p90     p99   p99.9     max  p50/px  p99/px fail  lag99  tgtCPU machine load1\n`);
  const results: Array<{ pair: number; name: string; load: number; result: OpenLoop; probe?: ProbeWindow }> = [];
  for (let pair = 1; pair <= Number(values.pairs); pair++) {
    let proxyPhase: OpenLoop | undefined;
    for (const t of [{ name: 'proxy', target: proxy, gateway: undefined }, ...gateways.map((g) => ({ name: g.name, target: g.target, gateway: g }))]) {
      await sleep(SETTLE_MS);
      const pid = t.gateway?.target.pids[0];
      if (values.probe && pid) process.kill(pid, 'SIGUSR2'); // opens the probe's window
      const from = Number(process.hrtime.bigint() / 1000n);
      const load = loadavg()[0]!;
      await t.gateway?.stats?.reset();
      const result = await openLoopInOwnProcess(t.target, phase);
      const serverLines = (await t.gateway?.stats?.read()) ?? [];
      let probe: ProbeWindow | undefined;
      if (values.probe && t.gateway && pid) {
        t.gateway.windows.push({ fromMicros: from, toMicros: Number(process.hrtime.bigint() / 1000n) });
        rmSync(t.gateway.probeFile, { force: true });
        process.kill(pid, 'SIGUSR2'); // writes the window
        for (let i = 0; i < 100 && !existsSync(t.gateway.probeFile); i++) await sleep(50);
        await sleep(50);
        probe = JSON.parse(readFileSync(t.gateway.probeFile, 'utf8')) as ProbeWindow;
      }
      if (!t.gateway) proxyPhase = result;
      results.push({ pair, name: t.name, load, result, probe });
      process.stdout.write(`${line(pair, t.name, result, t.gateway ? proxyPhase : undefined, load)}\n${slowestInTime(result)}\n`);
      if (probe) process.stdout.write(`${probeLines(probe, result.startEpochMs ?? probe.from).join('\n')}\n`);
      for (const l of serverLines) process.stdout.write(`    ${l}\n`);
    }
  }
  process.stdout.write('\nmedians over the pairs (p50 / p99, ms; ratios to the proxy):\n');
  const medianOf = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  const proxyP = (k: 'p50' | 'p99') => medianOf(results.filter((r) => r.name === 'proxy').map((r) => r.result[k]));
  for (const name of ['proxy', ...gateways.map((g) => g.name)]) {
    const mine = results.filter((r) => r.name === name);
    const [p50, p99] = (['p50', 'p99'] as const).map((k) => medianOf(mine.map((r) => r.result[k])));
    process.stdout.write(`  ${name.padEnd(12)} ${fmt(p50)} / ${fmt(p99)}  (${(p50! / proxyP('p50')!).toFixed(2)}× / ${(p99! / proxyP('p99')!).toFixed(2)}×)\n`);
  }

  if (values.probe) {
    for (const g of gateways) {
      await g.deployment.instances[0]!.stop(); // SIGTERM: V8 writes the profile
      const folder = join(profiles, g.name);
      const file = readdirSync(folder).find((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
      if (!file) continue;
      const profile = JSON.parse(readFileSync(join(folder, file), 'utf8')) as CpuProfile;
      process.stdout.write(`\nCPU profile of ${g.name}, its phases only:\n${summaryLines(summarise(profile, g.windows), 20).join('\n')}\n`);
    }
  }
  const out = join(import.meta.dirname, 'results');
  mkdirSync(out, { recursive: true });
  const file = join(out, `ttft-phase-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ what, trees, results }, null, 1));
  process.stdout.write(`\nraw results: ${file}\n`);
});
