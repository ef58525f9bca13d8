import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openLoop, type OpenLoop } from './load/open-loop.ts';
import { openLoopInOwnProcess } from './load/open-loop-process.ts';
import { runScript } from './script.ts';
import { directTarget, referenceProxy, startUpstream, type Target } from './targets.ts';
import { startTollgate } from './tollgate-target.ts';

/**
 * Why do the 1,000 req/s rows move between runs? Runs the open loop at one rate, several rounds,
 * against the upstream direct, the reference proxy and Tollgate on SQLite, with the generator in
 * its own process and (for comparison, as the benchmark did before) in this one, and prints what
 * separates the gateway from the machine: latency from the schedule and from the actual send, how
 * late the generator sent, the generator's, the target's and the whole machine's CPU.
 * Usage: node --import tsx bench/open-loop-check.ts [--rate 1000] [--seconds 5] [--rounds 3]
 */
const { values } = parseArgs({
  options: { rate: { type: 'string', default: '1000' }, seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' } },
});
const phase = { rate: Number(values.rate), seconds: Number(values.seconds), model: 'bench-fast', stream: false };
const line = (round: number, where: string, t: Target, l: OpenLoop) =>
  [
    `${round}`,
    where.padEnd(8),
    t.name.padEnd(24),
    ...[l.p50, l.p50FromSend, l.p99, l.p99FromSend, l.sendLagP50, l.sendLagP99].map((x) => x.toFixed(2).padStart(8)),
    l.achievedRate.toFixed(0).padStart(6),
    ...[l.generatorCpuShare, l.targetCpuShare, l.machineBusyCores].map((x) => x.toFixed(2).padStart(6)),
    `  load ${loadavg()[0]!.toFixed(1)}`,
  ].join(' ');

await runScript('open-loop-check', async ({ dir, onStop }) => {
  const upstream = await startUpstream();
  onStop(upstream.stop);
  const proxy = await referenceProxy(upstream.url);
  onStop(proxy.stop);
  const sqlite = await startTollgate({ upstreamUrl: upstream.url, databaseUrl: `sqlite:${join(dir, 'tollgate.db')}`, instances: 1, wallets: 1 });
  onStop(sqlite.stop);
  const targets = [directTarget(upstream), proxy, sqlite.row(1)];
  process.stdout.write(`open loop at ${phase.rate} req/s, ${phase.seconds} s a phase; ms, then req/s, then cores\n`);
  process.stdout.write(`r where    target                        p50 p50/send      p99 p99/send   lag50    lag99  sent   gen target machine\n`);
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const t of targets) {
      for (const where of ['process', 'harness'] as const) {
        await new Promise((r) => setTimeout(r, 2000));
        const l = where === 'process' ? await openLoopInOwnProcess(t, phase) : await openLoop(t, phase);
        process.stdout.write(`${line(round, where, t, l)}\n`);
      }
    }
  }
});
