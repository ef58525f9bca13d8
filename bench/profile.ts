import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { redisCounts, type RedisCounts } from './redis-counts.ts';
import { saturate } from './load/closed-loop.ts';
import { cpuMicrosOf, postgresCpuMicros, postgresPids, rssBytes, systemCalls } from './proc.ts';
import { heapSummaryLines, type HeapFile } from './profile-heap.ts';
import { summarise, summaryLines, type CpuProfile } from './profile-summary.ts';
import { runScript } from './script.ts';
import { startUpstream } from './targets.ts';
import { startTollgate } from './tollgate-target.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { startRedis } from '../test/support/redis.ts';

/**
 * Where one engine's request path spends its CPU at saturation: one `tollgate serve` under
 * `node --cpu-prof`, loaded by the closed loop with JSON requests, then stopped with SIGTERM so
 * that V8 writes the profile, which is summarised by profile-summary.ts. On PostgreSQL the
 * database server's own CPU per request is reported beside it (the other side of every wait).
 * With `--instances N` (PostgreSQL), N instances on one database share their rate limits in Redis,
 * as operators scale out; `--redis` puts one instance's limits in Redis too (what Redis alone adds).
 * Redis's own commands and CPU per request are printed beside PostgreSQL's. `--plain`: no profiler
 * (CPU per request as the benchmark measures it, without the sampling's own cost). `--heap`: no CPU
 * profiler either, but V8's sampling heap profiler over the loaded window (profile-heap-sampler.mjs):
 * bytes allocated per request by call site, and the collections they cost (profile-heap.ts).
 * Usage: node --import tsx bench/profile.ts --engine sqlite|postgres [--seconds 10] [--wallets 1] [--instances 1] [--redis] [--stream] [--plain|--heap] [--keep DIR]
 *   [--node-option=FLAG ...]
 */
const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite' },
    seconds: { type: 'string', default: '10' },
    wallets: { type: 'string', default: '1' },
    connections: { type: 'string', default: '64' },
    instances: { type: 'string', default: '1' },
    redis: { type: 'boolean', default: false },
    plain: { type: 'boolean', default: false },
    heap: { type: 'boolean', default: false },
    keep: { type: 'string' },
    // Streamed answers (the upstream's 24 events back to back) instead of JSON: CPU per stream.
    stream: { type: 'boolean', default: false },
    // A flag for the gateway's node (repeatable), to compare runtime settings side by side: --node-option=--max-semi-space-size=64
    'node-option': { type: 'string', multiple: true, default: [] },
  },
});
if (values.engine !== 'sqlite' && values.engine !== 'postgres') throw new Error('--engine must be sqlite or postgres');
const seconds = Number(values.seconds);
const wallets = Number(values.wallets);
const instances = Number(values.instances);
if (instances > 1 && values.engine !== 'postgres') throw new Error('--instances above 1 needs --engine postgres (SQLite has one writer process)');
const withRedis = values.redis || instances > 1;

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

/** The main thread's voluntary context switches: each is its event loop going to sleep in epoll_wait, so one wake-up after. */
function wakeUps(pids: number[]): number {
  let sum = 0;
  for (const pid of pids) sum += Number(readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8').match(/^voluntary_ctxt_switches:\s+(\d+)$/m)?.[1]);
  return sum;
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

/** Redis's commands (INFO commandstats) and its server's CPU over the loaded window, per request. */
function redisDeltaLines(before: RedisCounts, after: RedisCounts, requests: number, calls: string): string[] {
  const rows = Object.entries(after.calls)
    .map(([command, calls]) => ({ command, calls: calls - (before.calls[command] ?? 0) }))
    .filter((r) => r.calls > 0)
    .sort((a, b) => b.calls - a.calls);
  return [
    `\nRedis over the same window: server CPU ${((after.cpuMicros - before.cpuMicros) / requests).toFixed(0)} µs per request; system calls per request ${calls}; commands per request:`,
    ...rows.map((r) => `  ${(r.calls / requests).toFixed(3).padStart(9)}  ${r.command}`),
  ];
}

/** The sampler writes its profile when the second signal reaches it: wait for it (a large profile takes a moment). */
async function heapFile(path: string): Promise<HeapFile> {
  for (let waited = 0; !existsSync(path); waited += 100) {
    if (waited > 30_000) throw new Error(`no heap profile written at ${path}`);
    await sleep(100);
  }
  const file = JSON.parse(readFileSync(path, 'utf8')) as HeapFile & { error?: string };
  if (file.error) throw new Error(`the heap sampler failed: ${file.error}`);
  return file;
}

await runScript('profile', async ({ dir, onStop }) => {
  const profiles = values.keep ?? join(dir, 'profiles');
  mkdirSync(profiles, { recursive: true });
  const sampler = fileURLToPath(new URL('./profile-heap-sampler.mjs', import.meta.url));
  const profilerArgs = values.plain ? [] : values.heap ? [`--import=${sampler}`] : ['--cpu-prof', `--cpu-prof-dir=${profiles}`];
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
  let redisUrl: string | undefined;
  if (withRedis) {
    const redis = await startRedis();
    onStop(redis.stop);
    redisUrl = redis.url;
  }
  const deployment = await startTollgate({
    upstreamUrl: upstream.url,
    databaseUrl,
    instances,
    wallets,
    redisUrl,
    nodeArgs: [...(values['node-option'] ?? []), ...profilerArgs],
    env: values.heap ? { TOLLGATE_HEAP_PROFILE_DIR: profiles } : {},
  });
  onStop(deployment.stop);
  const target = deployment.row(wallets);
  const connections = Number(values.connections);
  const stream = values.stream;
  await saturate(target, { model: 'bench-fast', stream, seconds: 2, connections }); // warm-up, in the profile too
  if (values.engine === 'postgres') await resetStatements(databaseUrl);
  const pgBefore = postgresCpuMicros(pgPort);
  const redisBefore: RedisCounts | null = redisUrl ? await redisCounts(redisUrl) : null;
  // Redis's reads count the writes that reached it in separate events: how many hits each socket write carried.
  const redisCallsBefore = callsByPid(redisBefore ? [redisBefore.pid] : []);
  const pids = target.pids;
  const instanceBefore = pids.map((pid) => cpuMicrosOf([pid]));
  const gatewayCallsBefore = callsByPid(pids);
  const wakeUpsBefore = wakeUps(pids);
  const pgCallsBefore = callsByPid(postgresPids(pgPort));
  const monotonicMicros = () => Number(process.hrtime.bigint() / 1000n);
  const window = { fromMicros: monotonicMicros(), toMicros: 0 };
  const heapSampling = (): void => void pids.forEach((pid) => process.kill(pid, 'SIGUSR2')); // starts, then stops and writes
  if (values.heap) heapSampling();
  const load = await saturate(target, { model: 'bench-fast', stream, seconds, connections });
  window.toMicros = monotonicMicros();
  // Resident memory right after the load: what a larger young generation (--node-option=--max-semi-space-size) costs.
  const rssMB = pids.map((pid) => (rssBytes(pid) / 1024 / 1024).toFixed(0));
  if (values.heap) heapSampling();
  const pgPerRequest = (postgresCpuMicros(pgPort) - pgBefore) / load.completed;
  const perInstance = pids.map((pid, i) => (cpuMicrosOf([pid]) - instanceBefore[i]!) / load.completed);
  const redisCalls = callsPerRequest(redisCallsBefore, callsByPid(redisBefore ? [redisBefore.pid] : []), load.completed);
  const redisLines = redisBefore ? redisDeltaLines(redisBefore, await redisCounts(redisUrl!), load.completed, redisCalls) : [];
  const gatewayCalls = callsPerRequest(gatewayCallsBefore, callsByPid(pids), load.completed);
  const gatewayWakeUps = (wakeUps(pids) - wakeUpsBefore) / load.completed;
  const pgCalls = callsPerRequest(pgCallsBefore, callsByPid(postgresPids(pgPort)), load.completed);
  const statements = values.engine === 'postgres' ? await statementLines(databaseUrl, load.completed) : [];
  const head =
    `${values.engine}, ${stream ? 'streams' : 'JSON'}, ${wallets} wallet(s), ${instances} instance(s)${withRedis ? ', rate limits in Redis' : ''}, ${connections} connections, ${seconds} s` +
    `${values.plain ? '' : ' (only these samples: no start-up, no warm-up)'}: ${load.requestsPerSecond.toFixed(0)} req/s${load.failed ? ` (and ${load.failed} FAILED: not counted, their CPU is)` : ''}, ` +
    `gateway CPU ${load.cpuMicrosPerRequest.toFixed(0)} µs per request${instances > 1 ? ` (by instance: ${perInstance.map((c) => c.toFixed(0)).join(' + ')})` : ''}` +
    (Number.isFinite(pgPerRequest) ? `, PostgreSQL server CPU ${pgPerRequest.toFixed(0)} µs per request` : '') +
    `, machine busy ${load.machineBusyCores.toFixed(2)} cores, gateway RSS ${rssMB.join(' + ')} MB`;
  // Counts, unlike CPU time, do not swell on a loaded machine: they compare two trees on a busy one.
  const calls =
    `system calls per request (read and write families, /proc/PID/io): gateway${instances > 1 ? 's summed' : ''} ${gatewayCalls}` +
    ` (event-loop wake-ups ${gatewayWakeUps.toFixed(2)})` +
    (Number.isFinite(pgPerRequest) ? `; PostgreSQL server ${pgCalls}` : '');
  if (values.plain) {
    process.stdout.write([head, calls, ...redisLines, ...statements].join('\n') + '\n');
    return;
  }
  if (values.heap) {
    const heaps = await Promise.all(pids.map((pid) => heapFile(join(profiles, `${pid}.heapprofile.json`))));
    // Each instance's bytes over the requests of all: summed, they read as the deployment's per request.
    const lines = heaps.flatMap((h, i) => [instances > 1 ? `\ninstance ${i + 1} of ${instances}:` : '', ...heapSummaryLines(h, load.completed)]);
    process.stdout.write([head, calls, ...lines, ...redisLines, ...statements].join('\n') + '\n');
    return;
  }
  // SIGTERM: a graceful exit, on which V8 writes the .cpuprofile.
  await Promise.all(deployment.instances.map((g) => g.stop()));
  // One profile per thread (CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile); thread 0 is the
  // main thread, the request path. On SQLite the WAL checkpointer's thread writes its own.
  const summaries = pids.map((pid, i) => {
    const file = readdirSync(profiles).find((f) => new RegExp(`\\.${pid}\\.0\\.\\d+\\.cpuprofile$`).test(f));
    if (!file) throw new Error(`no main-thread .cpuprofile of instance ${i + 1} written in ${profiles}`);
    return [
      instances > 1 ? `\ninstance ${i + 1} of ${instances}:` : '',
      ...summaryLines(summarise(JSON.parse(readFileSync(join(profiles, file), 'utf8')) as CpuProfile, window)),
      values.keep ? `\nprofile kept: ${join(profiles, file)}` : '',
    ];
  });
  process.stdout.write([head, calls, ...summaries.flat(), ...redisLines, ...statements].join('\n') + '\n');
});
