import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { saturate } from './load/closed-loop.ts';
import { cpuMicrosOf } from './proc.ts';
import { summarise, summaryLines, type CpuProfile } from './profile-summary.ts';
import { runScript } from './script.ts';
import { startUpstream } from './targets.ts';
import { startTollgate } from './tollgate-target.ts';
import { startPostgres } from '../test/support/postgres.ts';

/**
 * Where one engine's request path spends its CPU at saturation: one `tollgate serve` under
 * `node --cpu-prof`, loaded by the closed loop with JSON requests, then stopped with SIGTERM so
 * that V8 writes the profile, which is summarised by profile-summary.ts. On PostgreSQL the
 * database server's own CPU per request is reported beside it (the other side of every wait).
 * Usage: node --import tsx bench/profile.ts --engine sqlite|postgres [--seconds 10] [--wallets 1] [--keep DIR]
 */
const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite' },
    seconds: { type: 'string', default: '10' },
    wallets: { type: 'string', default: '1' },
    connections: { type: 'string', default: '64' },
    keep: { type: 'string' },
  },
});
if (values.engine !== 'sqlite' && values.engine !== 'postgres') throw new Error('--engine must be sqlite or postgres');
const seconds = Number(values.seconds);
const wallets = Number(values.wallets);
/** CPU of a PostgreSQL server: the postmaster (found by its port) and every backend it forked. */
function postgresCpuMicros(port: number): number {
  const stats = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).flatMap((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return [{ pid: Number(pid), ppid: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]), cmdline }];
    } catch {
      return []; // exited while we looked
    }
  });
  const postmaster = stats.find((s) => s.cmdline.startsWith('/usr/lib/postgresql/') && s.cmdline.includes(`\0-p\0${port}\0`));
  if (!postmaster) return NaN;
  return cpuMicrosOf([postmaster.pid, ...stats.filter((s) => s.ppid === postmaster.pid).map((s) => s.pid)]);
}

await runScript('profile', async ({ dir, onStop }) => {
  const profiles = values.keep ?? join(dir, 'profiles');
  const upstream = await startUpstream();
  onStop(upstream.stop);
  let databaseUrl = `sqlite:${join(dir, 'tollgate.db')}`;
  let pgPort = NaN;
  if (values.engine === 'postgres') {
    const pg = await startPostgres();
    onStop(pg.stop);
    databaseUrl = await pg.database();
    pgPort = pg.port;
  }
  const deployment = await startTollgate({ upstreamUrl: upstream.url, databaseUrl, instances: 1, wallets, nodeArgs: ['--cpu-prof', `--cpu-prof-dir=${profiles}`] });
  onStop(deployment.stop);
  const target = deployment.row(wallets);
  const connections = Number(values.connections);
  await saturate(target, { model: 'bench-fast', stream: false, seconds: 2, connections }); // warm-up, in the profile too
  const pgBefore = postgresCpuMicros(pgPort);
  const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n);
  const window = { fromMicros: monotonicMicros(), toMicros: 0 };
  const load = await saturate(target, { model: 'bench-fast', stream: false, seconds, connections });
  window.toMicros = monotonicMicros();
  const pgPerRequest = (postgresCpuMicros(pgPort) - pgBefore) / load.completed;
  // SIGTERM: a graceful exit, on which V8 writes the .cpuprofile.
  await deployment.instances[0]!.stop();
  // One profile per thread (CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile); thread 0 is the
  // main thread, the request path. On SQLite the WAL checkpointer's thread writes its own.
  const file = readdirSync(profiles).find((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f));
  if (!file) throw new Error(`no main-thread .cpuprofile written in ${profiles}`);
  process.stdout.write(
    [
      `${values.engine}, ${wallets} wallet(s), ${connections} connections, ${seconds} s (only these samples: no start-up, no warm-up): ` +
        `${load.requestsPerSecond.toFixed(0)} req/s, gateway CPU ${load.cpuMicrosPerRequest.toFixed(0)} µs per request` +
        (Number.isFinite(pgPerRequest) ? `, PostgreSQL server CPU ${pgPerRequest.toFixed(0)} µs per request` : ''),
      ...summaryLines(summarise(JSON.parse(readFileSync(join(profiles, file), 'utf8')) as CpuProfile, window)),
      values.keep ? `\nprofile kept: ${join(profiles, file)}` : '',
    ].join('\n') + '\n',
  );
});
