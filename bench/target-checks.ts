import { costChecks } from './cost-checks.ts';
import type { Report } from './report.ts';
import { describeCondition, rowName, type RowCondition } from './rows.ts';
import { tailTargetChecks } from './tail-targets.ts';

/** One performance target of the issue, with the condition it was measured under and its value. */
export interface TargetCheck {
  met: boolean;
  /** Engine, wallets, instances and load, as the line prints them. */
  condition: string;
  text: string;
  /** Why the figure cannot be trusted as measured (a load generator that fell short), if it cannot. */
  caveat?: string;
}

const fmt = (x: number) => (Number.isNaN(x) ? '–' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));
const ratio = (a: number, b: number) => (a / b).toFixed(2);

/** The performance targets, each with its measured value; `all` is figures() of every row. */
export function targetChecks(r: Report, all: Record<string, Record<string, number>>): TargetCheck[] {
  const sqliteOne: RowCondition = { engine: 'SQLite', wallets: 1, instances: 1 };
  const pgMany: RowCondition = { engine: 'PostgreSQL', wallets: r.settings.wallets, instances: 1 };
  const pgManyTwo: RowCondition = { ...pgMany, instances: 2 };
  const sqlite = all[rowName(sqliteOne)]!;
  const ref = all[r.reference]!;
  const portkey = all['Portkey gateway']!;
  const direct = all[r.targets[0]!]!;
  const top = Math.max(...r.settings.rates);
  const low = Math.min(...r.settings.rates);
  const sat = 'saturation JSON (req/s)';
  const busy = 'machine busy at JSON saturation (cores)';
  const closed = `closed loop, ${r.settings.connections} connections`;
  const open = (rate: number) => `open loop at ${rate.toLocaleString('en-US')} req/s`;
  const on = (c: RowCondition, load: string) => `${describeCondition(c)} · ${load}`;
  const p50 = (row: Record<string, number>, kind: 'JSON' | 'TTFT') => row[`${kind} p50 @${top}/s (ms)`]!;
  const addedP50 = p50(sqlite, 'JSON') - p50(direct, 'JSON');
  const addedOverProxy = p50(sqlite, 'JSON') - p50(ref, 'JSON');
  const addedTtft = p50(sqlite, 'TTFT') - p50(direct, 'TTFT');
  const perEvent = sqlite['CPU per SSE event, all-in (µs)']!;
  const rss = sqlite['RSS per open stream (KB)']!;
  const heldHeap = sqlite['heap + external per open stream (KB)']!;
  const fewerStreams = r.memory[rowName(sqliteOne)]?.smaller?.open;
  const lagging = (rows: RowCondition | string, phase: string) =>
    generatorCaveat(r, [r.targets[0]!, r.reference, typeof rows === 'string' ? rows : rowName(rows)], phase);
  const checks: TargetCheck[] = [
    {
      met: sqlite[sat]! / ref[sat]! >= 0.6,
      condition: on(sqliteOne, closed),
      text: `JSON throughput ${fmt(sqlite[sat]!)} req/s = ${ratio(sqlite[sat]!, ref[sat]!)}× the minimal proxy (target ≥ 0.6×)`,
    },
    {
      met: sqlite[sat]! / portkey[sat]! >= 10,
      condition: on(sqliteOne, closed),
      text: `JSON throughput = ${(sqlite[sat]! / portkey[sat]!).toFixed(1)}× Portkey (target ≥ 10×)`,
    },
    {
      met: addedP50 <= 0.5,
      condition: on(sqliteOne, open(top)),
      text: `added JSON p50 over the upstream direct: ${fmt(addedP50)} ms (target ≤ 0.5 ms)`,
      caveat: lagging(sqliteOne, `json@${top}`),
    },
    {
      met: addedTtft <= 0.5,
      condition: on(sqliteOne, open(top)),
      text: `added time to first token p50 over the upstream direct: ${fmt(addedTtft)} ms (target ≤ 0.5 ms)`,
      caveat: lagging(sqliteOne, `ttft@${top}`),
    },
    { met: perEvent <= 30, condition: on(sqliteOne, closed), text: `CPU per streamed SSE event, all-in: ${fmt(perEvent)} µs (target ≤ 30 µs)` },
    {
      met: rss <= 32,
      condition: on(
        sqliteOne,
        `${fewerStreams ? `${fewerStreams.toLocaleString('en-US')} then ` : ''}${r.settings.streams.toLocaleString('en-US')} held streams`,
      ),
      text:
        `RSS per open stream: ${fmt(rss)} KB${fewerStreams ? ', the difference between the two sizes per stream' : ''} (target ≤ 32 KB); ` +
        `V8 heap + external after a forced collection: ${fmt(heldHeap)} KB`,
    },
    {
      met: addedOverProxy <= 0.5,
      condition: on(sqliteOne, open(top)),
      text: `added JSON p50 over the minimal proxy: ${fmt(addedOverProxy)} ms (target ≤ 0.5 ms)`,
      caveat: lagging(sqliteOne, `json@${top}`),
    },
  ];
  const many = all[rowName(pgMany)];
  const manyTwo = all[rowName(pgManyTwo)];
  if (many) {
    const p99 = many[`JSON p99 @${low}/s (ms)`]!;
    checks.push(
      {
        met: many[sat]! / ref[sat]! >= 0.3,
        condition: on(pgMany, closed),
        text: `JSON throughput ${fmt(many[sat]!)} req/s = ${ratio(many[sat]!, ref[sat]!)}× the minimal proxy (target ≥ 0.3×)`,
      },
      { met: p99 <= 25, condition: on(pgMany, open(low)), text: `JSON p99 ${fmt(p99)} ms (target ≤ 25 ms)`, caveat: lagging(pgMany, `json@${low}`) },
    );
  }
  if (many && manyTwo) {
    const cores = r.machine.cores;
    checks.push({
      met: manyTwo[sat]! / many[sat]! >= 1.6,
      condition: `${describeCondition(pgManyTwo)} against 1 · ${closed}`,
      text:
        `JSON throughput ${fmt(manyTwo[sat]!)} req/s = ${ratio(manyTwo[sat]!, many[sat]!)}× one instance's ${fmt(many[sat]!)} (target ≥ 1.6×); ` +
        `cores: one instance had the machine's ${cores}, the two instances the same ${cores} between them, and on both sides ` +
        `the load generator, the upstream, PostgreSQL (and for two, Redis) ran on those cores too; ` +
        `the machine was ${fmt(many[busy]!)} of ${cores} cores busy at one instance's saturation, ${fmt(manyTwo[busy]!)} at two's`,
    });
  }
  checks.push(...tailTargetChecks(r, all), ...costChecks(r, all));
  return checks;
}

/**
 * Why an open-loop figure is not the target's own: the generator fell short of its schedule in
 * that phase, for the row or for the baseline it is compared with.
 */
export function generatorCaveat(r: Report, rows: string[], phase: string): string | undefined {
  const short = rows.flatMap((row) => {
    const l = r.latency[row]?.[phase];
    if (l?.keptSchedule !== false) return [];
    return [`${row}: sent ${fmt(l.achievedRate)} of ${fmt(l.rate)} req/s, p99 ${fmt(l.sendLagP99)} ms late`];
  });
  return short.length ? `the load generator fell short (${short.join('; ')}): this figure measures the machine, not the gateway` : undefined;
}

/** The lines as printed: status, whether the run was quick, the condition, the figure, any caveat. */
export function targetLines(r: Report, checks: TargetCheck[]): string[] {
  const quick = r.settings.quick ? '(quick run: short phases, indicative only) ' : '';
  return checks.map((c) => `${c.met ? 'MET   ' : 'MISSED'} ${quick}[${c.condition}] ${c.text}${c.caveat ? `; ${c.caveat}` : ''}`);
}
