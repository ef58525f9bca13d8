import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { saturate } from './load/closed-loop.ts';
import { cpuMicrosOf, systemCalls } from './proc.ts';
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
 * Usage: node --import tsx bench/profile.ts --engine sqlite|postgres [--seconds 10] [--wallets 1] [--keep DIR] [--node-option=FLAG ...]
 */
const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite' },
    seconds: { type: 'string', default: '10' },
    wallets: { type: 'string', default: '1' },
    connections: { type: 'string', default: '64' },
    keep: { type: 'string' },
    // A flag for the gateway's node (repeatable), to compare runtime settings side by side: --node-option=--max-semi-space-size=64
    'node-option': { type: 'string', multiple: true, default: [] },
  },
});
if (values.engine !== 'sqlite' && values.engine !== 'postgres') throw new Error('--engine must be sqlite or postgres');
const seconds = Number(values.seconds);
const wallets = Number(values.wallets);
/** The processes of a PostgreSQL server: the postmaster (found by its port) and every backend it forked. */
function postgresPids(port: number): number[] {
  const stats = readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        return [{ pid: Number(pid), ppid: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]), cmdline }];
      } catch {
        return []; // exited while we looked
      }
    });
  const postmaster = stats.find((s) => s.cmdline.startsWith('/usr/lib/postgresql/') && s.cmdline.includes(`\0-p\0${port}\0`));
  if (!postmaster) return [];
  return [postmaster.pid, ...stats.filter((s) => s.ppid === postmaster.pid).map((s) => s.pid)];
}

/** CPU of a PostgreSQL server, NaN when there is none. A backend that exits between the listing and the read counts nothing. */
function postgresCpuMicros(port: number): number {
  const pids = postgresPids(port);
  if (!pids.length) return NaN;
  return pids.reduce((sum, pid) => {
    try {
      return sum + cpuMicrosOf([pid]);
    } catch {
      return sum;
    }
  }, 0);
}

/** Read and write system calls of the processes, summed, by pid (a backend that exits drops out of the next count). */
function callsByPid(pids: number[]): Map<number, { reads: number; writes: number }> {
  return new Map(pids.map((pid) => [pid, systemCalls(pid)]));
}

/** Per request, the calls made between two counts, over the processes counted both times. */
function callsPerRequest(before: ReturnType<typeof callsByPid>, after: ReturnType<typeof callsByPid>, requests: number): string {
  let reads = 0;
  let writes = 0;
  for (const [pid, now] of after) {
    const then = before.get(pid) ?? { reads: 0, writes: 0 };
    reads += now.reads - then.reads;
    writes += now.writes - then.writes;
  }
  return `${(reads / requests).toFixed(2)} reads, ${(writes / requests).toFixed(2)} writes`;
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function resetStatements(url: string): Promise<void> {
  await withClient(url, async (client) => {
    await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await client.query('SELECT pg_stat_statements_reset()');
  });
}

/** The server's statements over the loaded window, by time spent: calls per request, µs per call planning and running. */
async function statementLines(url: string, requests: number): Promise<string[]> {
  const { rows } = await withClient(url, (client) =>
    client.query<{ calls: string; plan: number; exec: number; query: string }>(
      `SELECT calls, total_plan_time AS plan, total_exec_time AS exec, query FROM pg_stat_statements
       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
       ORDER BY total_plan_time + total_exec_time DESC LIMIT 15`,
    ),
  );
  const ms = rows.reduce((sum, r) => sum + r.plan + r.exec, 0);
  return [
    `\nPostgreSQL statements (pg_stat_statements, the top 15 by time; ${((ms * 1000) / requests).toFixed(0)} µs of planning and execution per request in them):`,
    '  calls/req  plan µs  exec µs  statement',
    ...rows.map((r) => {
      const calls = Number(r.calls);
      const text = r.query.replace(/\s+/g, ' ').slice(0, 90);
      return `  ${(calls / requests).toFixed(2).padStart(9)}  ${((r.plan * 1000) / calls).toFixed(1).padStart(7)}  ${((r.exec * 1000) / calls).toFixed(1).padStart(7)}  ${text}`;
    }),
  ];
}

await runScript('profile', async ({ dir, onStop }) => {
  const profiles = values.keep ?? join(dir, 'profiles');
  const upstream = await startUpstream();
  onStop(upstream.stop);
  let databaseUrl = `sqlite:${join(dir, 'tollgate.db')}`;
  let pgPort = NaN;
  if (values.engine === 'postgres') {
    // pg_stat_statements: where the server's time goes, statement by statement (statementLines).
    const server = await startPostgres({ shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track_planning': 'on' });
    onStop(server.stop);
    databaseUrl = await server.database();
    pgPort = server.port;
  }
  const deployment = await startTollgate({
    upstreamUrl: upstream.url,
    databaseUrl,
    instances: 1,
    wallets,
    nodeArgs: [...(values['node-option'] ?? []), '--cpu-prof', `--cpu-prof-dir=${profiles}`],
  });
  onStop(deployment.stop);
  const target = deployment.row(wallets);
  const connections = Number(values.connections);
  await saturate(target, { model: 'bench-fast', stream: false, seconds: 2, connections }); // warm-up, in the profile too
  if (values.engine === 'postgres') await resetStatements(databaseUrl);
  const pgBefore = postgresCpuMicros(pgPort);
  const gatewayPid = deployment.instances[0]!.child.pid!;
  const gatewayCallsBefore = callsByPid([gatewayPid]);
  const pgCallsBefore = callsByPid(postgresPids(pgPort));
  const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n);
  const window = { fromMicros: monotonicMicros(), toMicros: 0 };
  const load = await saturate(target, { model: 'bench-fast', stream: false, seconds, connections });
  window.toMicros = monotonicMicros();
  const pgPerRequest = (postgresCpuMicros(pgPort) - pgBefore) / load.completed;
  const gatewayCalls = callsPerRequest(gatewayCallsBefore, callsByPid([gatewayPid]), load.completed);
  const pgCalls = callsPerRequest(pgCallsBefore, callsByPid(postgresPids(pgPort)), load.completed);
  const statements = values.engine === 'postgres' ? await statementLines(databaseUrl, load.completed) : [];
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
      `system calls per request (read and write families, /proc/PID/io): gateway ${gatewayCalls}` +
        (Number.isFinite(pgPerRequest) ? `; PostgreSQL server ${pgCalls}` : ''),
      ...summaryLines(summarise(JSON.parse(readFileSync(join(profiles, file), 'utf8')) as CpuProfile, window)),
      ...statements,
      values.keep ? `\nprofile kept: ${join(profiles, file)}` : '',
    ].join('\n') + '\n',
  );
});
