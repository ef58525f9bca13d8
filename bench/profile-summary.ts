import { readFileSync } from 'node:fs';

/**
 * Summarises a V8 .cpuprofile (node --cpu-prof): self time by function and by module, and the
 * share the process spent idle, waiting on its sockets (the database, the upstream, clients).
 * Usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile [--top N]
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
export interface CpuProfile {
  nodes: ProfileNode[];
  /** Microseconds on the monotonic clock (process.hrtime's) when profiling began. */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A stretch of the monotonic clock, in microseconds: only the samples taken inside it count. */
export interface Window {
  fromMicros: number;
  toMicros: number;
}

export interface ProfileSummary {
  totalMicros: number;
  /** Sampled while the event loop waited for I/O or a timer: V8's "(idle)". */
  idleMicros: number;
  byFunction: Array<{ name: string; micros: number }>;
  byModule: Array<{ name: string; micros: number }>;
}

/**
 * Which module a frame belongs to: a package under node_modules, a folder of Tollgate's src/ (or its
 * compiled dist/), a Node built-in, or V8's own pseudo-frames (garbage collection, native code).
 */
export function moduleOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) return /^\(.*\)$/.test(functionName) ? functionName : '(native)';
  // The last node_modules in the path: a nested dependency is its own package.
  const pkg = url.match(/.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (pkg) return pkg[1]!;
  const own = url.match(/\/(src|dist)\/([^/]+)(\/|$)/);
  if (own) return `tollgate ${own[2]!.includes('.') ? own[2] : `${own[2]}/`}`;
  const builtin = url.match(/^node:(?:internal\/)?([^/]+)/);
  if (builtin) return `node:${builtin[1]}`;
  return url.replace(/^file:\/\//, '');
}

export const functionLabel = (frame: ProfileNode['callFrame']) =>
  frame.url
    ? `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*\/(node_modules|src|dist)\//, '$1/').replace(/^file:\/\//, '')}:${frame.lineNumber + 1}`
    : frame.functionName || '(native)';

/**
 * Self time: each sample's time goes to the frame on top of the stack when it was taken. With a
 * window (or several: one process's phases), only the samples inside it count (the load, without
 * the process's start-up and warm-up).
 */
export function summarise(profile: CpuProfile, window?: Window | Window[]): ProfileSummary {
  const windows = window === undefined ? undefined : Array.isArray(window) ? window : [window];
  const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
  const byFunction = new Map<string, number>();
  const byModule = new Map<string, number>();
  let totalMicros = 0;
  let idleMicros = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const micros = profile.timeDeltas[i] ?? 0;
    at += micros;
    if (windows && !windows.some((w) => at >= w.fromMicros && at <= w.toMicros)) return;
    const frame = frames.get(id)!;
    totalMicros += micros;
    if (frame.functionName === '(idle)') idleMicros += micros;
    const fn = functionLabel(frame);
    const mod = moduleOf(frame);
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + micros);
    byModule.set(mod, (byModule.get(mod) ?? 0) + micros);
  });
  const sorted = (m: Map<string, number>) => [...m].map(([name, micros]) => ({ name, micros })).sort((a, b) => b.micros - a.micros);
  return { totalMicros, idleMicros, byFunction: sorted(byFunction), byModule: sorted(byModule) };
}

/** The summary as text: shares of the busy time (idle left out), so the columns add up to what the CPU did. */
export function summaryLines(s: ProfileSummary, top = 25): string[] {
  const busy = s.totalMicros - s.idleMicros;
  const pct = (micros: number) => `${((100 * micros) / busy).toFixed(1).padStart(5)}%`;
  const busyOnly = (rows: ProfileSummary['byFunction']) => rows.filter((r) => r.name !== '(idle)');
  return [
    `sampled ${(s.totalMicros / 1e6).toFixed(1)} s of the main thread: busy ${((100 * busy) / s.totalMicros).toFixed(1)}%, idle (waiting on I/O and timers) ${((100 * s.idleMicros) / s.totalMicros).toFixed(1)}%`,
    '',
    'self time by module, share of the busy time:',
    ...busyOnly(s.byModule)
      .slice(0, top)
      .map((r) => `  ${pct(r.micros)}  ${r.name}`),
    '',
    'self time by function, share of the busy time:',
    ...busyOnly(s.byFunction)
      .slice(0, top)
      .map((r) => `  ${pct(r.micros)}  ${r.name}`),
  ];
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const [file, flag, n] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile [--top N]\n');
    process.exit(2);
  }
  const top = flag === '--top' ? Number(n) : 25;
  process.stdout.write(`${summaryLines(summarise(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile), top).join('\n')}\n`);
}
