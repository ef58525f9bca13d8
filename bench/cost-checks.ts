import type { Report } from './report.ts';
import { describeCondition, rowName, type RowCondition } from './rows.ts';
import { DAY_REQUESTS, OLDER_REQUESTS } from './storage-case.ts';
import type { TargetCheck } from './target-checks.ts';

const fmt = (x: number) => (Number.isNaN(x) ? '–' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
const times = (x: number) => `${Number.isFinite(x) ? x.toFixed(2) : '–'}×`;

type Figures = Record<string, Record<string, number>>;

/**
 * The targets of the CPU per request, two instances and storage (issue 38), each with the row and
 * load it was measured on; the tail's lines are tail-targets.ts's. A row or case the run did not
 * measure prints no line.
 */
export function costChecks(r: Report, all: Figures): TargetCheck[] {
  return [...cpuChecks(r, all), ...twoInstanceChecks(r, all), ...storageChecks(r)];
}

const SQLITE: RowCondition = { engine: 'SQLite', wallets: 1, instances: 1 };
const POSTGRES: RowCondition = { engine: 'PostgreSQL', wallets: 1, instances: 1 };

/** CPU per JSON request at saturation, the database server's included, against the proxy and Portkey. */
function cpuChecks(r: Report, all: Figures): TargetCheck[] {
  const proxy = all[r.reference]!['CPU per JSON request (µs)']!;
  const portkey = all['Portkey gateway']?.['CPU per JSON request (µs)'] ?? NaN;
  const closed = `closed loop, ${r.settings.connections} connections`;
  return [SQLITE, POSTGRES].flatMap((row) => {
    const f = all[rowName(row)];
    if (!f) return [];
    const gateway = f['CPU per JSON request (µs)']!;
    const server = row.engine === 'PostgreSQL' ? f['database server CPU per JSON request (µs)']! : 0;
    const cpu = gateway + server;
    const parts =
      row.engine === 'PostgreSQL'
        ? `gateway ${fmt(gateway)} + PostgreSQL server ${fmt(server)} = ${fmt(cpu)} µs`
        : `${fmt(cpu)} µs (SQLite runs inside the gateway)`;
    return [
      {
        met: cpu / proxy <= 2.5,
        condition: `${describeCondition(row)} · ${closed}`,
        text: `CPU per JSON request, ${parts} = ${times(cpu / proxy)} the minimal proxy's ${fmt(proxy)} µs (target ≤ 2.5×)`,
      },
      {
        met: portkey / cpu >= 5,
        condition: `${describeCondition(row)} · ${closed}`,
        text: `CPU per JSON request: Portkey's ${fmt(portkey)} µs = ${times(portkey / cpu)} Tollgate's ${fmt(cpu)} µs (target ≥ 5×)`,
      },
    ];
  });
}

/**
 * Two instances against one on the same database and wallets: CPU per request summed over the
 * instances, at saturation and at the same offered load (the top open-loop rate, where both kept it).
 */
function twoInstanceChecks(r: Report, all: Figures): TargetCheck[] {
  const one: RowCondition = { engine: 'PostgreSQL', wallets: r.settings.wallets, instances: 1 };
  const two: RowCondition = { ...one, instances: 2 };
  const a = all[rowName(one)];
  const b = all[rowName(two)];
  if (!a || !b) return [];
  const top = Math.max(...r.settings.rates);
  const cpuAt = (name: string) => {
    const l = r.latency[name]?.[`json@${top}`];
    return l ? (l.targetCpuShare * 1e6) / l.achievedRate : NaN;
  };
  const server = (f: Record<string, number>) => fmt(f['database server CPU per JSON request (µs)']!);
  const line = (load: string, oneCpu: number, twoCpu: number, extra: string): TargetCheck => ({
    met: twoCpu / oneCpu <= 1.15,
    condition: `${describeCondition(two)} against 1 · ${load}`,
    text: `CPU per JSON request summed over the 2 instances ${fmt(twoCpu)} µs = ${times(twoCpu / oneCpu)} one instance's ${fmt(oneCpu)} µs (target ≤ 1.15×)${extra}`,
  });
  return [
    line(
      `closed loop, ${r.settings.connections} connections`,
      a['CPU per JSON request (µs)']!,
      b['CPU per JSON request (µs)']!,
      `; shared servers per request: PostgreSQL ${server(a)} µs for one instance, PostgreSQL and Redis ${server(b)} µs for two`,
    ),
    line(`open loop at ${top.toLocaleString('en-US')} req/s, the same load for both`, cpuAt(rowName(one)), cpuAt(rowName(two)), ''),
  ];
}

/** Bytes kept per request after the retention window, and the incremental ledger-check after a day (bench/storage-case.ts). */
function storageChecks(r: Report): TargetCheck[] {
  const s = r.storage;
  if (!s) return [];
  const on = `${s.engine} · ${s.wallets.toLocaleString('en-US')} wallets · 1 instance (the ledger's own operations, no HTTP)`;
  const m = (n: number) => `${(n / 1e6).toLocaleString('en-US', { maximumFractionDigits: 1 })} M`;
  return [
    {
      met: s.retained.bytesPerRequest <= 300,
      condition: `${on} · ${s.retained.requests.toLocaleString('en-US')} requests retired after the retention window, then VACUUM`,
      text: `bytes kept per request in the hot tables and their indexes: ${fmt(s.retained.bytesPerRequest)} (target ≤ 300)`,
    },
    {
      met: s.projection.dayMs < 1000,
      condition:
        `${on} · checkpoint job every ${s.job.periodSeconds} s · a day at 1,000 req/s (${m(DAY_REQUESTS)} requests) on ${m(OLDER_REQUESTS)} older: ` +
        `the tail after the job's checkpoint measured, ${m(s.projection.olderAtDay)} under it projected`,
      text:
        `incremental ledger-check ${fmt(s.projection.dayMs / 1000)} s (target < 1 s); ${fmt(s.projection.perMillionOlderMs / 1000)} s per million older; ` +
        `the job's pass ${fmt(s.job.ms / 1000)} s, ${fmt(s.job.cpuPerRequestUs)} µs CPU per request it checks; rule: ${s.projection.rule}`,
    },
  ];
}
