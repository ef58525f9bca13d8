/**
 * The report's sections that are measured on their own (start-up, pay-per-request): their figures
 * and how they print. Kept apart from the measuring code, which starts processes and a chain, so
 * that the report's formatting can be tested without any of it.
 */
/**
 * How fast the shipped command starts and how much an idle gateway holds, as an operator meets
 * them: `node bin/tollgate.mjs` (compiled JavaScript in dist/), each run a new process.
 */
export interface Startup {
  /** Wall time of `tollgate --help`, median of the runs (ms). */
  helpMs: number;
  /** From spawning `tollgate serve` on a new SQLite database to GET /health answering 200, median (ms). */
  healthMs: number;
  /** Resident set of that gateway two seconds after /health answered, no traffic, median (bytes). */
  idleRssBytes: number;
  runs: number;
}

export function startupLines(s: Startup): string[] {
  return [
    `Start-up (median of ${s.runs} runs, each a new process):`,
    `  tollgate --help                           ${s.helpMs.toFixed(0)} ms`,
    `  tollgate serve to /health answering 200   ${s.healthMs.toFixed(0)} ms (new SQLite database, migrations included)`,
    `  idle gateway RSS                          ${(s.idleRssBytes / 2 ** 20).toFixed(0)} MB`,
  ];
}

export interface PayPerRequestLatency {
  requests: number;
  keyed: { median: number; p90: number };
  offer: { median: number; p90: number };
  paid: { median: number; p90: number };
}

export function payPerRequestLines(l: PayPerRequestLatency): string[] {
  const row = (name: string, x: { median: number; p90: number }) =>
    `  ${name.padEnd(36)} median ${x.median.toFixed(1).padStart(7)} ms   p90 ${x.p90.toFixed(1).padStart(7)} ms`;
  return [
    `Pay-per-request latency, ${l.requests} sequential JSON requests each (instant upstream, anvil mining at once):`,
    row('keyed request', l.keyed),
    row('unpaid request (402 offer)', l.offer),
    row('paid retry (verify+settle+run)', l.paid),
    `  added by paying (paid retry - keyed, medians): ${(l.paid.median - l.keyed.median).toFixed(1)} ms; on a public chain add its block time`,
  ];
}
