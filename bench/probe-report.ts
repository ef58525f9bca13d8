import { percentile } from './load/open-loop.ts';

/** What bench/gateway-probe.mjs writes for one window (times in epoch milliseconds). */
export interface ProbeWindow {
  from: number;
  to: number;
  requests: StreamStart[];
  stalls: Array<{ at: number; ms: number }>;
  gc: Array<{ at: number; ms: number; kind: string }>;
  batches: Array<{ at: number; units: number; waitedMs: number; ranMs: number }>;
  /** New upstream connections the gateway's undici opened. */
  connects: number;
  loopDelay: { min: number; mean: number; max: number; p50: number; p90: number; p99: number; p999: number; count: number };
}

/** The moments of one chat request's start, as the probe saw them (each absent if it never came). */
export interface StreamStart {
  start: number;
  handler?: number;
  headers?: number;
  upstreamCreated?: number;
  upstreamSent?: number;
  upstreamHeaders?: number;
  upstreamWord?: number;
  word?: number;
}

/** The stretches a stream's start is cut into, each from one moment to the next. */
export const SEGMENTS: Array<{ name: string; from: keyof StreamStart; to: keyof StreamStart }> = [
  { name: 'request to handler (auth, body read and parsed)', from: 'start', to: 'handler' },
  { name: 'handler to SSE headers (plan, reservation committed)', from: 'handler', to: 'headers' },
  { name: 'SSE headers to upstream request created', from: 'headers', to: 'upstreamCreated' },
  { name: 'upstream request queued in the pool / connect', from: 'upstreamCreated', to: 'upstreamSent' },
  { name: 'upstream request sent to its response headers', from: 'upstreamSent', to: 'upstreamHeaders' },
  { name: "upstream headers to the upstream's first word", from: 'upstreamHeaders', to: 'upstreamWord' },
  { name: 'first word in, to first word written to the client', from: 'upstreamWord', to: 'word' },
  { name: 'in the gateway, request to first word written', from: 'start', to: 'word' },
];

const fmt = (x: number) => (Number.isNaN(x) ? '–' : x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

/** p50 / p90 / p99 / p99.9 / max of a list of milliseconds, as printed. */
export function distribution(xs: number[]): string {
  const s = sorted(xs);
  return [50, 90, 99, 99.9].map((p) => fmt(percentile(s, p))).join(' / ') + ` / ${fmt(s.at(-1) ?? NaN)}`;
}

/**
 * The probe's window as lines: the event loop's delay and its stalls (when, in seconds from
 * `phaseStart`), the collections, the group-commit batches, and each stretch of a stream's start
 * as a distribution; then which stretch the slowest 1% (in the gateway) spent their time in.
 */
export function probeLines(w: ProbeWindow, phaseStart: number): string[] {
  const at = (t: number) => `${((t - phaseStart) / 1000).toFixed(2)}s`;
  const d = w.loopDelay;
  const stalls = [...w.stalls].sort((a, b) => b.ms - a.ms);
  const byKind = new Map<string, { n: number; ms: number; max: number }>();
  for (const g of w.gc) {
    const k = byKind.get(g.kind) ?? { n: 0, ms: 0, max: 0 };
    byKind.set(g.kind, { n: k.n + 1, ms: k.ms + g.ms, max: Math.max(k.max, g.ms) });
  }
  const lines = [
    `    event-loop delay, ms: p50 ${fmt(d.p50)}, p90 ${fmt(d.p90)}, p99 ${fmt(d.p99)}, p99.9 ${fmt(d.p999)}, max ${fmt(d.max)} (${d.count} samples)`,
    `    stalls over 10 ms: ${stalls.length}, ${fmt(stalls.reduce((s, x) => s + x.ms, 0))} ms in all; longest: ${
      stalls
        .slice(0, 6)
        .map((s) => `${fmt(s.ms)} ms at ${at(s.at - s.ms)}`)
        .join(', ') || 'none'
    }`,
    `    garbage collection: ${[...byKind].map(([kind, k]) => `${k.n} ${kind} (${fmt(k.ms)} ms, longest ${fmt(k.max)})`).join(', ') || 'none'}`,
    `    new upstream connections: ${w.connects}`,
  ];
  if (w.batches.length) {
    const units = w.batches.map((b) => b.units);
    lines.push(
      `    group-commit batches: ${w.batches.length}, units per batch p50 / p90 / p99 / p99.9 / max ${distribution(units)}`,
      `      oldest unit's wait before its batch ran, ms: ${distribution(w.batches.map((b) => b.waitedMs))}`,
      `      batch run (BEGIN to COMMIT answered), ms: ${distribution(w.batches.map((b) => b.ranMs))}`,
    );
  }
  const complete = w.requests.filter((r) => r.word !== undefined);
  lines.push(`    a stream's start in the gateway (${complete.length} of ${w.requests.length} reached their first word), ms, p50 / p90 / p99 / p99.9 / max:`);
  for (const s of SEGMENTS) {
    const xs = complete.flatMap((r) => (r[s.from] !== undefined && r[s.to] !== undefined ? [r[s.to]! - r[s.from]!] : []));
    lines.push(`      ${s.name.padEnd(54)} ${distribution(xs)}`);
  }
  const slow = [...complete].sort((a, b) => b.word! - b.start - (a.word! - a.start)).slice(0, Math.ceil(complete.length / 100));
  if (slow.length) {
    const share = SEGMENTS.slice(0, -1).map((s) => ({
      name: s.name,
      ms: slow.reduce((sum, r) => sum + (r[s.from] !== undefined && r[s.to] !== undefined ? r[s.to]! - r[s.from]! : 0), 0) / slow.length,
    }));
    lines.push(
      `    the slowest 1% in the gateway (${slow.length}, started ${at(Math.min(...slow.map((r) => r.start)))}–${at(Math.max(...slow.map((r) => r.start)))}), mean ms per stretch:`,
      ...share.filter((s) => s.ms >= 0.05).map((s) => `      ${s.name.padEnd(54)} ${fmt(s.ms)}`),
    );
  }
  return lines;
}
