import type { Saturation } from './load/closed-loop.ts';
import type { HeldStreams } from './load/held-streams.ts';
import type { OpenLoop } from './load/open-loop.ts';
import { startupLines, type Startup } from './startup.ts';
import { payPerRequestLines, type PayPerRequestLatency } from './pay-per-request.ts';

export interface Report {
  date: string;
  machine: { cpu: string; cores: number; memoryGiB: number; kernel: string; node: string };
  settings: { seconds: number; rounds: number; connections: number; rates: number[]; streams: number; eventsPerStream: number };
  reference: string;
  targets: string[];
  saturation: Record<string, { json: Saturation[]; stream: Saturation[] }>;
  latency: Record<string, Record<string, OpenLoop>>;
  memory: Record<string, HeldStreams>;
  ledger: Record<string, number>;
  /** Absent in results from before start-up was measured. */
  startup?: Startup;
  payPerRequest?: PayPerRequestLatency;
  durationSeconds: number;
}

const median = (xs: number[]) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** The headline figures of one target, derived from the raw measurements. */
export function figures(r: Report, target: string) {
  const sat = r.saturation[target]!;
  const cpuRequest = median(sat.json.map((s) => s.cpuMicrosPerRequest));
  const cpuStream = median(sat.stream.map((s) => s.cpuMicrosPerRequest));
  const lat = (k: string) => r.latency[target]?.[k];
  const mem = r.memory[target];
  return {
    'saturation JSON (req/s)': median(sat.json.map((s) => s.requestsPerSecond)),
    'saturation stream (streams/s)': median(sat.stream.map((s) => s.requestsPerSecond)),
    'failed requests at saturation': sat.json.concat(sat.stream).reduce((n, s) => n + s.failed, 0),
    'CPU per JSON request (µs)': cpuRequest,
    'CPU per stream (µs)': cpuStream,
    'CPU per SSE event, all-in (µs)': cpuStream / r.settings.eventsPerStream,
    'CPU per SSE event, beyond a JSON request (µs)': (cpuStream - cpuRequest) / r.settings.eventsPerStream,
    ...Object.fromEntries(
      r.settings.rates.flatMap((rate) => [
        [`JSON p50 @${rate}/s (ms)`, lat(`json@${rate}`)?.p50 ?? NaN],
        [`JSON p99 @${rate}/s (ms)`, lat(`json@${rate}`)?.p99 ?? NaN],
        [`TTFT p50 @${rate}/s (ms)`, lat(`ttft@${rate}`)?.p50 ?? NaN],
        [`TTFT p99 @${rate}/s (ms)`, lat(`ttft@${rate}`)?.p99 ?? NaN],
        [`failed @${rate}/s`, (lat(`json@${rate}`)?.failed ?? 0) + (lat(`ttft@${rate}`)?.failed ?? 0)],
      ]),
    ),
    'RSS per open stream (KB)': mem ? mem.bytesPerStream / 1024 : NaN,
    // The single sample taken as the last stream opened, as reported before the median (for comparison).
    'RSS per open stream, first sample (KB)': mem?.rssAtOpenBytes !== undefined ? (mem.rssAtOpenBytes - mem.rssIdleBytes) / mem.open / 1024 : NaN,
    'streams open at the sample': mem ? mem.open : NaN,
  } as Record<string, number>;
}

const fmt = (x: number) => (Number.isNaN(x) ? '–' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));

export function printReport(r: Report): void {
  const all = Object.fromEntries(r.targets.map((t) => [t, figures(r, t)]));
  const ref = all[r.reference]!;
  const direct = all[r.targets[0]!]!;
  const width = 24;
  const out: string[] = [];
  out.push('');
  out.push(`Tollgate benchmark, ${r.date}: ${r.machine.cores} × ${r.machine.cpu}, ${r.machine.memoryGiB} GiB, Node ${r.machine.node}`);
  out.push(`Ratios (×) are to the reference, ${r.reference}, measured in the same run.`);
  out.push('');
  out.push(`${''.padEnd(44)}${r.targets.map((t) => t.padStart(width)).join('')}`);
  for (const metric of Object.keys(ref)) {
    const cells = r.targets.map((t) => {
      const v = all[t]![metric]!;
      const base = ref[metric]!;
      const ratio = t !== r.reference && base && Number.isFinite(v) && !/failed|open at/.test(metric) ? ` (${(v / base).toFixed(2)}×)` : '';
      return `${fmt(v)}${ratio}`.padStart(width);
    });
    out.push(`${metric.padEnd(44)}${cells.join('')}`);
  }
  out.push('');
  out.push('Added latency versus the upstream direct (ms):');
  for (const rate of r.settings.rates) {
    for (const kind of ['JSON p50', 'TTFT p50', 'JSON p99', 'TTFT p99']) {
      const metric = `${kind} @${rate}/s (ms)`;
      out.push(`${`  ${kind} @${rate}/s`.padEnd(44)}${r.targets.slice(1).map((t) => `${fmt(all[t]![metric]! - direct[metric]!)}`.padStart(width)).join('')}`);
    }
  }
  const failures = r.targets.flatMap((t) =>
    Object.entries(r.latency[t] ?? {}).flatMap(([phase, l]) => (l.failed ? [`  ${t}, ${phase}: ${Object.entries(l.failures ?? {}).map(([why, n]) => `${n} × ${why}`).join(', ')}`] : [])),
  );
  if (failures.length) out.push('', 'Open-loop failures (HTTP status, or the client error):', ...failures);
  out.push('');
  out.push(`Ledger reserve+settle (ops/s): SQLite ${fmt(r.ledger.sqlite!)}, PostgreSQL ${fmt(r.ledger.postgres!)}; as a share of the reference proxy's JSON throughput: ${(r.ledger.sqlite! / ref['saturation JSON (req/s)']!).toFixed(2)}× and ${(r.ledger.postgres! / ref['saturation JSON (req/s)']!).toFixed(2)}×`);
  if (r.startup) out.push('', ...startupLines(r.startup));
  if (r.payPerRequest) out.push('', ...payPerRequestLines(r.payPerRequest));
  out.push('');
  out.push(...targetChecks(r, all).map((c) => `${c.met ? 'MET   ' : 'MISSED'} ${c.text}`));
  out.push(`\n(${r.durationSeconds.toFixed(0)} s in all)`);
  process.stdout.write(`${out.join('\n')}\n`);
}

/** The performance targets of the issue, each with its measured value. */
export function targetChecks(r: Report, all: Record<string, Record<string, number>> = Object.fromEntries(r.targets.map((t) => [t, figures(r, t)]))) {
  const sqlite = all['Tollgate SQLite']!;
  const ref = all[r.reference]!;
  const portkey = all['Portkey gateway']!;
  const direct = all[r.targets[0]!]!;
  const top = Math.max(...r.settings.rates);
  const sat = 'saturation JSON (req/s)';
  const addedP50 = sqlite[`JSON p50 @${top}/s (ms)`]! - direct[`JSON p50 @${top}/s (ms)`]!;
  const addedTtft = sqlite[`TTFT p50 @${top}/s (ms)`]! - direct[`TTFT p50 @${top}/s (ms)`]!;
  const perEvent = sqlite['CPU per SSE event, all-in (µs)']!;
  const rss = sqlite['RSS per open stream (KB)']!;
  return [
    { met: sqlite[sat]! / ref[sat]! >= 0.6, text: `SQLite JSON throughput ${fmt(sqlite[sat]!)} req/s = ${(sqlite[sat]! / ref[sat]!).toFixed(2)}× the minimal proxy (target ≥ 0.6×)` },
    { met: sqlite[sat]! / portkey[sat]! >= 10, text: `SQLite JSON throughput = ${(sqlite[sat]! / portkey[sat]!).toFixed(1)}× Portkey (target ≥ 10×)` },
    { met: addedP50 <= 0.5, text: `added p50 at ${top} req/s: ${fmt(addedP50)} ms (target ≤ 0.5 ms)` },
    { met: addedTtft <= 0.5, text: `added time to first token p50 at ${top} req/s: ${fmt(addedTtft)} ms (target ≤ 0.5 ms)` },
    { met: perEvent <= 30, text: `CPU per streamed SSE event, all-in: ${fmt(perEvent)} µs (target ≤ 30 µs)` },
    { met: rss <= 32, text: `RSS per open stream at ${r.settings.streams} streams: ${fmt(rss)} KB (target ≤ 32 KB)` },
  ];
}
