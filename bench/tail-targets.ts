import type { Report } from './report.ts';
import { describeCondition, rowName, type RowCondition } from './rows.ts';
import { generatorCaveat, type TargetCheck } from './target-checks.ts';

const fmt = (x: number) => (Number.isNaN(x) ? '–' : Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2));

/**
 * The tail under load, at the benchmark's top open-loop rate (1,000 a second): time to first token
 * p99 within 3× the reference proxy's on both engines, its p50 within 2× on PostgreSQL, and the JSON
 * p99 within 3× on both. Ratios to the proxy measured in the same run, since the machine moves
 * both; the one-wallet rows, which are the ones that stream.
 */
export function tailTargetChecks(r: Report, all: Record<string, Record<string, number>>): TargetCheck[] {
  const top = Math.max(...r.settings.rates);
  const ref = all[r.reference];
  if (!ref) return [];
  const engines: RowCondition[] = [
    { engine: 'SQLite', wallets: 1, instances: 1 },
    { engine: 'PostgreSQL', wallets: 1, instances: 1 },
  ];
  const checks: TargetCheck[] = [];
  const rate = top.toLocaleString('en-US');
  const ratioCheck = (c: RowCondition, metric: string, bound: number, what: string, load: string, phase: string): TargetCheck | undefined => {
    const row = all[rowName(c)];
    const mine = row?.[metric];
    const proxy = ref[metric];
    if (mine === undefined || proxy === undefined || Number.isNaN(mine)) return undefined;
    const ratio = mine / proxy;
    return {
      met: ratio <= bound,
      condition: `${describeCondition(c)} · ${load}`,
      text: `${what} ${fmt(mine)} ms = ${ratio.toFixed(2)}× the minimal proxy's ${fmt(proxy)} ms (target ≤ ${bound}×)`,
      caveat: generatorCaveat(r, [r.reference, rowName(c)], phase),
    };
  };
  const streams = `open loop at ${rate} streams/s (paced upstream)`;
  const requests = `open loop at ${rate} req/s`;
  for (const c of engines) {
    const ttft = ratioCheck(c, `TTFT p99 @${top}/s (ms)`, 3, 'time to first token p99', streams, `ttft@${top}`);
    if (ttft) checks.push({ ...ttft, text: ttft.text + newConnectionShare(r.latency[rowName(c)]?.[`ttft@${top}`]) });
  }
  const pgP50 = ratioCheck(engines[1]!, `TTFT p50 @${top}/s (ms)`, 2, 'time to first token p50', streams, `ttft@${top}`);
  if (pgP50) checks.push(pgP50);
  for (const c of engines) {
    const json = ratioCheck(c, `JSON p99 @${top}/s (ms)`, 3, 'JSON p99', requests, `json@${top}`);
    if (json) checks.push(json);
  }
  return checks;
}

/**
 * How many of a phase's slowest 1% the generator sent on a connection it had just opened: a tail
 * made of new connections waits in the accept queue, before the gateway sees the request
 * (bench/README.md, "New connections wait for the loop"). Empty for results recorded without it.
 */
function newConnectionShare(phase: Report['latency'][string][string] | undefined): string {
  const slowest = phase?.slowest ?? [];
  if (slowest.length === 0 || slowest[0]!.newSocket === undefined) return '';
  return `; its slowest 1%: ${slowest.filter((s) => s.newSocket).length} of ${slowest.length} on a new connection`;
}
