import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Saturation } from '../../bench/load/closed-loop.ts';
import { keptSchedule, type OpenLoop } from '../../bench/load/open-loop.ts';
import { nthRequest } from '../../bench/load/request.ts';
import { figures, reportText, type Report } from '../../bench/report.ts';
import { rowName, type RowCondition } from '../../bench/rows.ts';
import { projectDay, type StorageCase } from '../../bench/storage-case.ts';
import { targetChecks, targetLines } from '../../bench/target-checks.ts';

// Only the arithmetic and the wording are tested here, on made-up measurements: the benchmark
// itself measures, and timings stay out of npm test.
const sat = (requestsPerSecond: number, cpuMicrosPerRequest: number, serverCpuMicrosPerRequest?: number): Saturation => ({
  requestsPerSecond,
  completed: requestsPerSecond * 5,
  failed: 0,
  cpuMicrosPerRequest,
  machineBusyCores: 1.9,
  ...(serverCpuMicrosPerRequest === undefined ? {} : { serverCpuMicrosPerRequest }),
});
const open = (rate: number, p50: number, p99: number, short = false): OpenLoop => ({
  rate,
  sent: rate * 5,
  failed: 0,
  failures: {},
  p50,
  p99,
  p50FromSend: p50,
  p99FromSend: p99,
  slowest: [],
  achievedRate: short ? rate * 0.8 : rate,
  sendLagP50: short ? 3 : 0.02,
  sendLagP99: short ? 12 : 0.3,
  generatorCpuShare: 0.3,
  targetCpuShare: 0.5,
  machineBusyCores: 1.2,
  keptSchedule: !short,
});
const latencies = (p50: number, p99: number) => ({
  'json@200': open(200, p50, p99),
  'json@1000': open(1000, p50, p99),
  'ttft@200': open(200, p50 + 5, p99 + 5),
  'ttft@1000': open(1000, p50 + 5, p99 + 5),
});

const SQLITE: RowCondition = { engine: 'SQLite', wallets: 1, instances: 1 };
const PG: RowCondition = { engine: 'PostgreSQL', wallets: 1, instances: 1 };
const PG_MANY: RowCondition = { engine: 'PostgreSQL', wallets: 100, instances: 1 };
const PG_TWO: RowCondition = { engine: 'PostgreSQL', wallets: 1, instances: 2 };
const PG_TWO_MANY: RowCondition = { engine: 'PostgreSQL', wallets: 100, instances: 2 };

const checks = (ms: [number, number]): StorageCase['checks'] => [
  { olderRequests: 160_000, newRequests: 61_000, ms: ms[0] },
  { olderRequests: 1_060_000, newRequests: 61_000, ms: ms[1] },
];
const storageCase = (bytesPerRequest: number, ms: [number, number]): StorageCase => ({
  engine: 'SQLite',
  wallets: 100,
  retained: { requests: 20_000, hotBytes: bytesPerRequest * 20_000, bytesPerRequest, tables: { ledger_entries: bytesPerRequest * 20_000 }, retentionMs: 900 },
  checks: checks(ms),
  job: { periodSeconds: 60, requests: 60_000, ms: 1_000, cpuMs: 900, cpuPerRequestUs: 15 },
  projection: projectDay(checks(ms)),
});

function report(o: { quick?: boolean; twoInstances?: number; twoInstancesCpu?: number; shortAt1000?: boolean; storage?: StorageCase } = {}): Report {
  const rows = [SQLITE, PG, PG_MANY, PG_TWO, PG_TWO_MANY];
  const names = ['upstream direct', 'node:http+undici proxy', 'Portkey gateway', ...rows.map(rowName)];
  const full = (json: number, cpu: number) => ({ json: [sat(json, cpu)], stream: [sat(json / 2, cpu * 4)] });
  const jsonOnly = (json: number, cpu: number, server?: number) => ({ json: [sat(json, cpu, server)], stream: [] });
  const sqliteLatency = latencies(1.2, 9);
  if (o.shortAt1000) sqliteLatency['json@1000'] = open(1000, 35, 80, true);
  return {
    date: '2026-11-26T23:00:00.000Z',
    machine: { cpu: 'Test CPU', cores: 2, memoryGiB: 24, kernel: 'test', node: 'v20.20.2' },
    settings: { seconds: 5, rounds: 1, connections: 64, rates: [200, 1000], streams: 2000, eventsPerStream: 24, wallets: 100, quick: o.quick ?? false },
    loadAverage: { start: [0.1, 0.2, 0.3], end: [1.5, 0.9, 0.5] },
    reference: 'node:http+undici proxy',
    targets: names,
    scaleOut: [rowName(PG_MANY), rowName(PG_TWO), rowName(PG_TWO_MANY)],
    rows: Object.fromEntries(rows.map((c) => [rowName(c), c])),
    saturation: {
      'upstream direct': full(20_000, 50),
      'node:http+undici proxy': full(10_000, 100),
      'Portkey gateway': full(700, 1700),
      [rowName(SQLITE)]: full(6_500, 150),
      [rowName(PG)]: { json: [sat(700, 800, 200)], stream: [sat(350, 3200, 800)] },
      [rowName(PG_MANY)]: jsonOnly(3_500, 400, 150),
      [rowName(PG_TWO)]: jsonOnly(900, 900),
      [rowName(PG_TWO_MANY)]: jsonOnly(o.twoInstances ?? 6_000, o.twoInstancesCpu ?? 450, 170),
    },
    latency: {
      'upstream direct': latencies(0.3, 2),
      'node:http+undici proxy': latencies(0.5, 4),
      'Portkey gateway': latencies(3, 30),
      [rowName(SQLITE)]: sqliteLatency,
      [rowName(PG)]: latencies(3, 600),
      [rowName(PG_MANY)]: { 'json@200': open(200, 2, 20), 'json@1000': open(1000, 3, 40) },
      [rowName(PG_TWO)]: { 'json@200': open(200, 4, 400), 'json@1000': open(1000, 50, 900) },
      [rowName(PG_TWO_MANY)]: { 'json@200': open(200, 2.5, 22), 'json@1000': open(1000, 4, 45) },
    },
    memory: {},
    ledger: { sqlite: 15_000, postgres: 1_500 },
    ...(o.storage ? { storage: o.storage } : {}),
    durationSeconds: 300,
  };
}

const linesOf = (r: Report) => targetLines(r, targetChecks(r, Object.fromEntries(r.targets.map((t) => [t, figures(r, t)]))));

describe('npm run bench report', () => {
  test('rows are named from what they ran on; one wallet on one instance keeps its old name', () => {
    assert.equal(rowName(SQLITE), 'Tollgate SQLite');
    assert.equal(rowName(PG), 'Tollgate PostgreSQL');
    assert.equal(rowName(PG_MANY), 'Tollgate PostgreSQL, 100 wallets');
    assert.equal(rowName(PG_TWO), 'Tollgate PostgreSQL ×2, 1 wallet');
    assert.equal(rowName({ ...PG_TWO_MANY, wallets: 1000 }), 'Tollgate PostgreSQL ×2, 1,000 wallets');
  });

  test('every target line names its engine, wallets, instances and load', () => {
    const lines = linesOf(report({ storage: storageCase(245, [100, 109]) }));
    assert.equal(lines.length, 23, lines.join('\n'));
    assert.deepEqual(
      lines.map((l) => l.match(/^(MET   |MISSED) \[([^\]]+)\]/)?.[2]),
      [
        'SQLite · 1 wallet · 1 instance · closed loop, 64 connections',
        'SQLite · 1 wallet · 1 instance · closed loop, 64 connections',
        'SQLite · 1 wallet · 1 instance · open loop at 1,000 req/s',
        'SQLite · 1 wallet · 1 instance · open loop at 1,000 req/s',
        'SQLite · 1 wallet · 1 instance · closed loop, 64 connections',
        'SQLite · 1 wallet · 1 instance · 2,000 held streams',
        'SQLite · 1 wallet · 1 instance · open loop at 1,000 req/s',
        'PostgreSQL · 100 wallets · 1 instance · closed loop, 64 connections',
        'PostgreSQL · 100 wallets · 1 instance · open loop at 200 req/s',
        'PostgreSQL · 100 wallets · 2 instances against 1 · closed loop, 64 connections',
        'SQLite · 1 wallet · 1 instance · open loop at 1,000 streams/s (paced upstream)',
        'PostgreSQL · 1 wallet · 1 instance · open loop at 1,000 streams/s (paced upstream)',
        'PostgreSQL · 1 wallet · 1 instance · open loop at 1,000 streams/s (paced upstream)',
        'SQLite · 1 wallet · 1 instance · open loop at 1,000 req/s',
        'PostgreSQL · 1 wallet · 1 instance · open loop at 1,000 req/s',
        'SQLite · 1 wallet · 1 instance · closed loop, 64 connections',
        'SQLite · 1 wallet · 1 instance · closed loop, 64 connections',
        'PostgreSQL · 1 wallet · 1 instance · closed loop, 64 connections',
        'PostgreSQL · 1 wallet · 1 instance · closed loop, 64 connections',
        'PostgreSQL · 100 wallets · 2 instances against 1 · closed loop, 64 connections',
        'PostgreSQL · 100 wallets · 2 instances against 1 · open loop at 1,000 req/s, the same load for both',
        "SQLite · 100 wallets · 1 instance (the ledger's own operations, no HTTP) · 20,000 requests retired after the retention window, then VACUUM",
        "SQLite · 100 wallets · 1 instance (the ledger's own operations, no HTTP) · checkpoint job every 60 s · a day at 1,000 req/s (86.4 M requests) on 10 M older: the tail after the job's checkpoint measured, 96.3 M under it projected",
      ],
    );
  });

  test('the TTFT p99 line says how many of the slowest 1% came on a new connection, when the run recorded it', () => {
    const r = report();
    const phase = r.latency[rowName(PG)]!['ttft@1000']!;
    phase.slowest = [
      { atMs: 1_010, ms: 1_900, sendLagMs: 1, onSocketMs: 2, newSocket: true, headersMs: 1_880 },
      { atMs: 1_020, ms: 1_700, sendLagMs: 1, onSocketMs: 2, newSocket: true, headersMs: 1_690 },
      { atMs: 3_500, ms: 600, sendLagMs: 1, onSocketMs: 2, newSocket: false, headersMs: 40 },
    ];
    const lines = linesOf(r);
    const line = lines.find((l) => /PostgreSQL [^\]]*streams\/s[^\]]*\] time to first token p99/.test(l)) ?? assert.fail(lines.join('\n'));
    assert.match(line, /; its slowest 1%: 2 of 3 on a new connection$/);
    const sqlite = lines.find((l) => /\[SQLite [^\]]*streams\/s[^\]]*\] time to first token p99/.test(l)) ?? assert.fail(lines.join('\n'));
    assert.doesNotMatch(sqlite, /new connection/, 'a phase without the record says nothing');
  });

  test('the tail, CPU, two-instance and storage targets: each figure against its rule', () => {
    const lines = linesOf(report({ storage: storageCase(245, [100, 109]) }));
    const find = (text: RegExp) => lines.find((l) => text.test(l)) ?? assert.fail(`no line matches ${text}:\n${lines.join('\n')}`);
    // Time to first token and JSON p99 at 1,000/s against the proxy's (p99 9 ms TTFT, 4 ms JSON; p50 5.5 ms TTFT).
    assert.match(
      find(/^\S+ +\[SQLite [^\]]*streams\/s[^\]]*\] time to first token p99/),
      /^MET .*p99 14\.0 ms = 1\.56× the minimal proxy's 9\.00 ms \(target ≤ 3×\)/,
    );
    assert.match(find(/PostgreSQL [^\]]*streams\/s[^\]]*\] time to first token p99/), /^MISSED .*p99 605 ms = 67\.22× the minimal proxy's 9\.00 ms/);
    assert.match(find(/streams\/s[^\]]*\] time to first token p50/), /^MET .*p50 8\.00 ms = 1\.45× the minimal proxy's 5\.50 ms \(target ≤ 2×\)/);
    assert.match(find(/\[SQLite [^\]]*1,000 req\/s\] JSON p99/), /^MET .*JSON p99 9\.00 ms = 2\.25×/);
    assert.match(find(/\[PostgreSQL · 1 wallet[^\]]*1,000 req\/s\] JSON p99/), /^MISSED .*JSON p99 600 ms = 150\.00×/);
    // CPU: PostgreSQL's counts its server's too (800 + 200 µs against the proxy's 100 and Portkey's 1,700).
    assert.match(find(/CPU per JSON request, 150 µs/), /^MET .*= 1\.50× the minimal proxy's 100 µs \(target ≤ 2\.5×\)/);
    assert.match(find(/gateway 800 \+ PostgreSQL server 200 = 1000 µs/), /^MISSED .*= 10\.00× the minimal proxy's/);
    assert.match(find(/Portkey's 1700 µs = 11\.33× Tollgate's 150 µs/), /^MET .*\(target ≥ 5×\)/);
    assert.match(find(/Portkey's 1700 µs = 1\.70× Tollgate's 1000 µs/), /^MISSED /);
    // Two instances: 450 summed against one's 400 is 1.125×; 480 is 1.20×.
    assert.match(
      find(/summed over the 2 instances 450 µs/),
      /^MET .*= 1\.13× one instance's 400 µs \(target ≤ 1\.15×\); .*PostgreSQL 150 µs for one instance, PostgreSQL and Redis 170 µs/,
    );
    const closedTwo = linesOf(report({ twoInstancesCpu: 480 })).find((l) => /closed loop, 64 connections\] CPU per JSON request summed/.test(l))!;
    assert.match(closedTwo, /^MISSED .*480 µs = 1\.20×/);
    // Storage: 245 bytes kept; the check 109 ms over the tail + 10 ms per million older over the 95.28 M more under the checkpoint.
    assert.match(find(/bytes kept per request/), /^MET .*: 245 \(target ≤ 300\)/);
    const day = find(/incremental ledger-check/);
    assert.match(day, /^MISSED .*ledger-check 1\.06 s \(target < 1 s\); 0\.01 s per million older; the job's pass 1\.00 s, 15\.0 µs CPU per request it checks/);
    assert.match(day, /rule: 109 ms measured over the tail of 61,000 new on 1\.06 M older, \+ 10\.0 ms per million older × 95\.28 M/);
    assert.match(linesOf(report({ storage: storageCase(301, [100, 109]) })).find((l) => /bytes kept/.test(l))!, /^MISSED /);
    // A check that did not grow with the history projects to what was measured over the tail.
    assert.match(linesOf(report({ storage: storageCase(245, [100, 90]) })).find((l) => /incremental/.test(l))!, /^MET .*ledger-check 0\.09 s/);
  });

  test('the new targets: PostgreSQL against the proxy, its p99, two instances against one, SQLite over the proxy', () => {
    const lines = linesOf(report());
    const find = (text: RegExp) => lines.find((l) => text.test(l)) ?? assert.fail(`no line matches ${text}:\n${lines.join('\n')}`);
    assert.match(find(/SQLite .* JSON throughput 6500 req\/s/), /^MET .*= 0\.65× the minimal proxy \(target ≥ 0\.6×\)/);
    assert.match(find(/added JSON p50 over the minimal proxy/), /^MISSED .*: 0\.70 ms \(target ≤ 0\.5 ms\)/);
    assert.match(
      find(/PostgreSQL · 100 wallets · 1 instance · closed loop/),
      /^MET .*JSON throughput 3500 req\/s = 0\.35× the minimal proxy \(target ≥ 0\.3×\)/,
    );
    assert.match(find(/PostgreSQL · 100 wallets · 1 instance · open loop at 200/), /^MET .*JSON p99 20\.0 ms \(target ≤ 25 ms\)/);
    const two = find(/2 instances against 1/);
    assert.match(two, /^MET .*JSON throughput 6000 req\/s = 1\.71× one instance's 3500 \(target ≥ 1\.6×\)/);
    // The cores each side had, and who else used them.
    assert.match(two, /one instance had the machine's 2, the two instances the same 2 between them/);
    assert.match(two, /the load generator, the upstream, PostgreSQL/);
    // How busy the machine was on each side: a second instance has only what the first left.
    assert.match(two, /the machine was 1\.90 of 2 cores busy at one instance's saturation, 1\.90 at two's/);
    assert.match(linesOf(report({ twoInstances: 4_000 })).find((l) => /2 instances against 1/.test(l))!, /^MISSED .*= 1\.14×/);
  });

  test('the tail at 1,000 a second: time to first token and JSON p99 as ratios to the proxy in the same run', () => {
    const lines = linesOf(report());
    const find = (text: RegExp) => lines.find((l) => text.test(l)) ?? assert.fail(`no line matches ${text}:\n${lines.join('\n')}`);
    // The proxy's TTFT at 1,000/s: p50 5.5 ms, p99 9 ms; its JSON p99 4 ms.
    assert.match(find(/^\S+ +\[SQLite .*streams\/s.*\] time to first token p99/), /^MET .*p99 14\.0 ms = 1\.56× the minimal proxy's 9\.00 ms \(target ≤ 3×\)/);
    assert.match(find(/^\S+ +\[PostgreSQL .*streams\/s.*\] time to first token p99/), /^MISSED .*p99 605 ms = 67\.22× the minimal proxy's 9\.00 ms/);
    assert.match(
      find(/\] time to first token p50/),
      /^MET +\[PostgreSQL · 1 wallet · 1 instance · .*\] .*p50 8\.00 ms = 1\.45× the minimal proxy's 5\.50 ms \(target ≤ 2×\)/,
    );
    assert.match(find(/^\S+ +\[SQLite .*1,000 req\/s\] JSON p99/), /^MET .*JSON p99 9\.00 ms = 2\.25× the minimal proxy's 4\.00 ms \(target ≤ 3×\)/);
    assert.match(find(/^\S+ +\[PostgreSQL · 1 wallet.*1,000 req\/s\] JSON p99/), /^MISSED .*JSON p99 600 ms = 150\.00×/);
  });

  test('a quick run marks every target line as quick', () => {
    const lines = linesOf(report({ quick: true }));
    assert.equal(lines.length, 21);
    for (const line of lines) assert.match(line, /^(MET   |MISSED) \(quick run: short phases, indicative only\) \[/);
    for (const line of linesOf(report())) assert.doesNotMatch(line, /quick/);
  });

  test('a latency target whose load generator fell short says so, with the rate it reached', () => {
    const lines = linesOf(report({ shortAt1000: true }));
    const line = lines.find((l) => /added JSON p50 over the upstream direct/.test(l))!;
    assert.match(
      line,
      /the load generator fell short \(Tollgate SQLite: sent 800 of 1000 req\/s, p99 12\.0 ms late\): this figure measures the machine, not the gateway/,
    );
    assert.doesNotMatch(lines.find((l) => /closed loop/.test(l))!, /fell short/);
    assert.match(
      reportText(report({ shortAt1000: true })),
      /fell short of its schedule[^\n]*\n {2}Tollgate SQLite, json@1000: sent 800 of 1000 req\/s, 3\.00 \/ 12\.0 ms late/,
    );
  });

  test('the printed report has the scale-out table: proxy, PostgreSQL one wallet, many wallets, two instances', () => {
    const text = reportText(report());
    const scaleOut = text.slice(text.indexOf('PostgreSQL as operators scale it'));
    const header = scaleOut.split('\n')[2]!;
    assert.deepEqual(header.trim().split(/\s{2,}/), [
      'node:http+undici proxy',
      'Tollgate PostgreSQL',
      'Tollgate PostgreSQL, 100 wallets',
      'Tollgate PostgreSQL ×2, 1 wallet',
      'Tollgate PostgreSQL ×2, 100 wallets',
    ]);
    assert.match(scaleOut, /\nsaturation JSON \(req\/s\) +10000 +700 \(0\.07×\) +3500 \(0\.35×\) +900 \(0\.09×\) +6000 \(0\.60×\)\n/);
    assert.match(scaleOut, /\nCPU per JSON request \(µs\) +100 +800 \(8\.00×\) +400 \(4\.00×\) +900 \(9\.00×\) +450 \(4\.50×\)\n/);
    assert.doesNotMatch(scaleOut.slice(0, scaleOut.indexOf('Added latency')), /stream|SSE|TTFT|RSS/);
    assert.match(text, /Load average at the start and the end: 0\.10 0\.20 0\.30 and 1\.50 0\.90 0\.50/);
  });
});

describe('the load generators', () => {
  test('requests take the wallets in turn, and each wallet alternates between the instances', () => {
    const seen = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const { instance, wallet } = nthRequest(i, 2, 100);
      seen.set(`${wallet}/${instance}`, (seen.get(`${wallet}/${instance}`) ?? 0) + 1);
    }
    // 100 wallets × 2 instances, each pair twice: an even split, and no wallet tied to one instance.
    assert.equal(seen.size, 200);
    assert.ok([...seen.values()].every((n) => n === 2));
    assert.deepEqual(
      [0, 1, 2, 3].map((i) => nthRequest(i, 1, 1)),
      Array(4).fill({ instance: 0, wallet: 0 }),
    );
  });

  test('an open loop kept its schedule only at the asked rate and on time', () => {
    assert.equal(keptSchedule({ rate: 1000, achievedRate: 995, sendLagP99: 0.4 }), true);
    assert.equal(keptSchedule({ rate: 1000, achievedRate: 900, sendLagP99: 0.4 }), false);
    assert.equal(keptSchedule({ rate: 1000, achievedRate: 1000, sendLagP99: 5 }), false);
    assert.equal(keptSchedule({ rate: 1000, achievedRate: 1000, sendLagP99: 1.5 }), true, "a timer tick late is the generator's normal");
  });
});
