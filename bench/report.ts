import type { Saturation } from './load/closed-loop.ts';
import { perHeldStream, type HeldStreams } from './load/held-streams.ts';
import type { OpenLoop } from './load/open-loop.ts';
import { payPerRequestLines, startupLines, type PayPerRequestLatency, type Startup } from './report-sections.ts';
import type { RowCondition } from './rows.ts';
import type { StorageCase } from './storage-case.ts';
import { storageLines } from './storage-lines.ts';
import { targetChecks, targetLines } from './target-checks.ts';
import { median } from './median.ts';

export interface Report {
  date: string;
  machine: { cpu: string; cores: number; memoryGiB: number; kernel: string; node: string };
  settings: {
    seconds: number;
    rounds: number;
    connections: number;
    rates: number[];
    streams: number;
    eventsPerStream: number;
    wallets: number;
    quick: boolean;
  };
  /** The machine's load average (1, 5, 15 minutes) as the run started and as it ended. */
  loadAverage: { start: number[]; end: number[] };
  reference: string;
  /** Every row, the upstream direct first; the scale-out rows (scaleOut) after the others. */
  targets: string[];
  /** The rows measured for JSON only (throughput, CPU, latency): the PostgreSQL wallets and instances. */
  scaleOut: string[];
  /** What each Tollgate row ran on. */
  rows: Record<string, RowCondition>;
  saturation: Record<string, { json: Saturation[]; stream: Saturation[] }>;
  latency: Record<string, Record<string, OpenLoop>>;
  memory: Record<string, HeldStreams>;
  ledger: Record<string, number>;
  /** Absent in results from before start-up was measured. */
  startup?: Startup;
  payPerRequest?: PayPerRequestLatency;
  /** Issue 38 §4 (bench/storage-case.ts); absent in results from before 2026-11-29. */
  storage?: StorageCase;
  durationSeconds: number;
}

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
    // NaN (–) for a target without a server of its own, and in results from before 2026-11-29.
    'database server CPU per JSON request (µs)': median(sat.json.map((s) => s.serverCpuMicrosPerRequest ?? NaN)),
    // Results from before 2026-11-27 have no machineBusyCores: NaN, printed as –.
    'machine busy at JSON saturation (cores)': median(sat.json.map((s) => s.machineBusyCores ?? NaN)),
    'CPU per stream (µs)': cpuStream,
    'CPU per SSE event, all-in (µs)': cpuStream / r.settings.eventsPerStream,
    'CPU per SSE event, beyond a JSON request (µs)': (cpuStream - cpuRequest) / r.settings.eventsPerStream,
    ...Object.fromEntries(
      r.settings.rates.flatMap((rate) => [
        [`JSON p50 @${rate}/s (ms)`, lat(`json@${rate}`)?.p50 ?? NaN],
        [`JSON p99 @${rate}/s (ms)`, lat(`json@${rate}`)?.p99 ?? NaN],
        [`TTFT p50 @${rate}/s (ms)`, lat(`ttft@${rate}`)?.p50 ?? NaN],
        [`TTFT p99 @${rate}/s (ms)`, lat(`ttft@${rate}`)?.p99 ?? NaN],
        [`JSON failed @${rate}/s`, lat(`json@${rate}`)?.failed ?? NaN],
        [`TTFT failed @${rate}/s`, lat(`ttft@${rate}`)?.failed ?? NaN],
        // Whether the open loop was what it claims: the rate the generator reached, and how busy the target was.
        [`JSON sent @${rate}/s (req/s)`, lat(`json@${rate}`)?.achievedRate ?? NaN],
        [`target CPU @${rate}/s JSON (cores)`, lat(`json@${rate}`)?.targetCpuShare ?? NaN],
        [`machine busy @${rate}/s JSON (cores)`, lat(`json@${rate}`)?.machineBusyCores ?? NaN],
      ]),
    ),
    // Between the phase's two sizes (results from before 2026-11-29: over the idle figure, one size).
    'RSS per open stream (KB)': mem ? perHeldStream(mem, 'rss') / 1024 : NaN,
    // V8's heap and the buffers it knows of, after a forced collection: the steady figure (– for a target that cannot be probed).
    'heap + external per open stream (KB)': mem ? perHeldStream(mem, 'heap') / 1024 : NaN,
    // One size over its idle figure, as the RSS line was before 2026-11-29 (for comparison).
    'RSS per open stream, one size (KB)': mem ? mem.bytesPerStream / 1024 : NaN,
    // The single sample taken as the last stream opened, as reported before the median (for comparison).
    'RSS per open stream, first sample (KB)': mem?.rssAtOpenBytes !== undefined ? (mem.rssAtOpenBytes - mem.rssIdleBytes) / mem.open / 1024 : NaN,
    'streams open at the sample': mem ? mem.open : NaN,
  } as Record<string, number>;
}

const fmt = (x: number) => (Number.isNaN(x) ? '–' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
const LABEL = 44;
/** A column as wide as its longest row name, never narrower than 24, so that names never run together. */
const columnWidth = (rows: string[]) => Math.max(24, ...rows.map((t) => t.length + 2));

/** One table: a line per metric, a column per row, each cell with its ratio to the reference. */
function table(r: Report, all: Record<string, Record<string, number>>, rows: string[], metrics: string[]): string[] {
  const ref = all[r.reference]!;
  const width = columnWidth(rows);
  const out = [`${''.padEnd(LABEL)}${rows.map((t) => t.padStart(width)).join('')}`];
  for (const metric of metrics) {
    const cells = rows.map((t) => {
      const v = all[t]![metric]!;
      const base = ref[metric]!;
      const ratio = t !== r.reference && base && Number.isFinite(v) && !/failed|open at|sent|cores/.test(metric) ? ` (${(v / base).toFixed(2)}×)` : '';
      return `${fmt(v)}${ratio}`.padStart(width);
    });
    out.push(`${metric.padEnd(LABEL)}${cells.join('')}`);
  }
  return out;
}

/** Added latency over the upstream direct, per rate, for the given rows and kinds. */
function addedLatency(r: Report, all: Record<string, Record<string, number>>, rows: string[], kinds: string[]): string[] {
  const direct = all[r.targets[0]!]!;
  // Aligned under table(), whose first column is the reference's: these rows start one column in.
  const width = columnWidth([r.reference, ...rows]);
  return r.settings.rates.flatMap((rate) =>
    kinds.map((kind) => {
      const metric = `${kind} @${rate}/s (ms)`;
      return `${`  ${kind} @${rate}/s`.padEnd(LABEL)}${rows.map((t) => `${fmt(all[t]![metric]! - direct[metric]!)}`.padStart(width)).join('')}`;
    }),
  );
}

/** Open-loop phases whose generator fell short of its schedule: their latencies measure the machine. */
function shortfalls(r: Report): string[] {
  return r.targets.flatMap((t) =>
    Object.entries(r.latency[t] ?? {}).flatMap(([phase, l]) =>
      l.keptSchedule === false
        ? [
            `  ${t}, ${phase}: sent ${fmt(l.achievedRate)} of ${l.rate} req/s, ${fmt(l.sendLagP50)} / ${fmt(l.sendLagP99)} ms late (p50 / p99), generator CPU ${fmt(l.generatorCpuShare)} of a core, target's ${fmt(l.targetCpuShare)}, machine busy ${fmt(l.machineBusyCores)} of ${r.machine.cores} cores`,
          ]
        : [],
    ),
  );
}

/** The report as printed: the tables, failures, the ledger, start-up, and the target lines. */
export function reportText(r: Report): string {
  const all = Object.fromEntries(r.targets.map((t) => [t, figures(r, t)]));
  const main = r.targets.filter((t) => !r.scaleOut.includes(t));
  const metrics = Object.keys(all[r.reference]!);
  const out: string[] = [];
  out.push('');
  out.push(
    `Tollgate benchmark, ${r.date}: ${r.machine.cores} × ${r.machine.cpu}, ${r.machine.memoryGiB} GiB, Node ${r.machine.node}${r.settings.quick ? ' (quick run)' : ''}`,
  );
  out.push(
    `Load average at the start and the end: ${r.loadAverage.start.map(fmt).join(' ')} and ${r.loadAverage.end.map(fmt).join(' ')} (1, 5, 15 min; above 0 means other work shared the cores)`,
  );
  out.push(`Ratios (×) are to the reference, ${r.reference}, measured in the same run.`);
  out.push('');
  out.push(...table(r, all, main, metrics));
  out.push('');
  out.push('Added latency versus the upstream direct (ms):');
  out.push(...addedLatency(r, all, main.slice(1), ['JSON p50', 'TTFT p50', 'JSON p99', 'TTFT p99']));
  if (r.scaleOut.length) {
    const rows = [r.reference, ...main.filter((t) => r.rows[t]?.engine === 'PostgreSQL'), ...r.scaleOut];
    out.push('');
    out.push(
      `PostgreSQL as operators scale it: one wallet and ${r.settings.wallets} wallets, one instance and two (Redis rate limits), JSON only; CPU is every instance's, summed:`,
    );
    out.push('');
    out.push(
      ...table(
        r,
        all,
        rows,
        metrics.filter((m) => /JSON|failed/.test(m) && !/stream|SSE|TTFT/.test(m)),
      ),
    );
    out.push('');
    out.push('Added latency versus the upstream direct (ms):');
    out.push(...addedLatency(r, all, rows, ['JSON p50', 'JSON p99']));
  }
  const failures = r.targets.flatMap((t) =>
    Object.entries(r.latency[t] ?? {}).flatMap(([phase, l]) =>
      l.failed
        ? [
            `  ${t}, ${phase}: ${Object.entries(l.failures ?? {})
              .map(([why, n]) => `${n} × ${why}`)
              .join(', ')}`,
          ]
        : [],
    ),
  );
  if (failures.length) out.push('', 'Open-loop failures (HTTP status, or the client error):', ...failures);
  const short = shortfalls(r);
  if (short.length)
    out.push('', 'Open-loop phases where the load generator fell short of its schedule (their latencies measure the machine, not the target):', ...short);
  const proxy = all[r.reference]!['saturation JSON (req/s)']!;
  out.push('');
  out.push(
    `Ledger reserve+settle (ops/s): SQLite ${fmt(r.ledger.sqlite!)}, PostgreSQL ${fmt(r.ledger.postgres!)}; as a share of the reference proxy's JSON throughput: ${(r.ledger.sqlite! / proxy).toFixed(2)}× and ${(r.ledger.postgres! / proxy).toFixed(2)}×`,
  );
  if (r.startup) out.push('', ...startupLines(r.startup));
  if (r.payPerRequest) out.push('', ...payPerRequestLines(r.payPerRequest));
  if (r.storage) out.push('', ...storageLines(r.storage));
  out.push('');
  out.push(...targetLines(r, targetChecks(r, all)));
  out.push(`\n(${r.durationSeconds.toFixed(0)} s in all)`);
  return `${out.join('\n')}\n`;
}
