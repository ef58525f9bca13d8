import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { heapDiffLines, readHeapSnapshot } from './heap-diff.ts';
import { heapOwnerLines, heapOwners } from './heap-owners.ts';
import { heapProbe, type ProbedMemory } from './heap-probe-client.ts';
import { chatBody } from './load/request.ts';
import { ensureBenchPackages } from './packages.ts';
import { runScript } from './script.ts';
import { startUpstream, type Target } from './targets.ts';
import { startTollgate } from './tollgate-target.ts';

/**
 * What a held stream costs the gateway, measured apart from the noise of RSS: N slow streams held
 * open (bench/load/held-streams.ts) at two sizes, `--runs` times each, and at each moment the
 * gateway's memory after a forced full collection (bench/heap-probe.mjs, preloaded: bench only).
 * Prints per run and size the RSS (sampled as the benchmark does, and after the collection), the
 * V8 heap used and the external/arrayBuffers memory, each per stream over the idle figure, and the
 * slope between the two sizes, which leaves out what a burst of opening costs once (pools, JIT,
 * the allocator's free lists). `--snapshot`: a heap snapshot idle and with the larger size held,
 * diffed by constructor (`--detail`: plain objects by their properties, closures by their source line,
 * strings by their text), per stream, then by what holds it (bench/heap-owners.ts: the head of each new
 * subtree of the dominator tree); `--keep-snapshots DIR` copies both there for bench/heap-diff.ts and heap-owners.ts.
 * `--prompt-kb N`: each request carries a prompt of N KB (an agent's is tens of KB), to show what scales with it.
 * Usage: node --import tsx bench/held-memory.ts [--engine sqlite|postgres] [--sizes 500,2000] [--runs 3] [--prompt-kb 0]
 *          [--snapshot [--detail] [--keep-snapshots DIR]] [--top 30]
 */
const { values } = parseArgs({
  options: {
    engine: { type: 'string', default: 'sqlite' },
    sizes: { type: 'string', default: '500,2000' },
    runs: { type: 'string', default: '3' },
    snapshot: { type: 'boolean', default: false },
    'keep-snapshots': { type: 'string' },
    detail: { type: 'boolean', default: false },
    'prompt-kb': { type: 'string', default: '0' },
    top: { type: 'string', default: '30' },
  },
});
if (values.engine !== 'sqlite' && values.engine !== 'postgres') throw new Error('--engine must be sqlite or postgres');
const sizes = values.sizes.split(',').map(Number);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

await runScript('held-memory', async ({ dir, onStop }) => {
  ensureBenchPackages((text) => process.stderr.write(`${text}\n`));
  const { saturate } = await import('./load/closed-loop.ts');
  const { holdStreams } = await import('./load/held-streams.ts');
  const upstream = await startUpstream();
  onStop(upstream.stop);
  let databaseUrl = `sqlite:${join(dir, 'tollgate.db')}`;
  if (values.engine === 'postgres') {
    const { startPostgres } = await import('../test/support/postgres.ts');
    const server = await startPostgres();
    onStop(server.stop);
    databaseUrl = await server.database();
  }
  const memoryProbe = heapProbe(dir, 'gateway');
  if (values['keep-snapshots']) mkdirSync(values['keep-snapshots'], { recursive: true });
  const deployment = await startTollgate({
    upstreamUrl: upstream.url,
    databaseUrl,
    instances: 1,
    wallets: 1,
    nodeArgs: memoryProbe.nodeArgs,
    env: memoryProbe.env,
  });
  onStop(deployment.stop);
  const target: Target = deployment.row(1);
  const pid = target.pids[0]!;
  const body = chatBody('bench-slow', true, Number(values['prompt-kb']) * 1024);
  await saturate(target, { model: 'bench-fast', stream: false, seconds: 1, connections: 64 });

  const probe = (snapshot = false) => memoryProbe.measure(pid, { snapshot });

  const kb = (bytes: number) => (bytes / 1024).toFixed(1).padStart(7);
  const fields = ['rss', 'heapUsed', 'external', 'arrayBuffers'] as const;
  process.stdout.write(
    `held streams on ${values.engine}, prompt ${values['prompt-kb']} KB: KB per stream over the idle figure (both after a forced full collection, but rssSampled)\n`,
  );
  process.stdout.write(`run      N  open  rssSampled     rss  heapUsed  external  arrayBuf   idle heap MB\n`);
  const rows: Array<{ run: number; n: number; perStream: Record<string, number>; held: ProbedMemory; idle: ProbedMemory }> = [];
  let snapshots: { idle: string; held: string; n: number } | undefined;
  const runs = Number(values.runs);
  for (let run = 1; run <= runs; run++) {
    for (const n of sizes) {
      const wantSnapshot = values.snapshot && run === runs && n === Math.max(...sizes);
      const idle = await probe(wantSnapshot);
      const idleSnapshot = wantSnapshot ? join(values['keep-snapshots'] ?? dir, 'idle.heapsnapshot') : undefined;
      if (idleSnapshot) writeFileSync(idleSnapshot, readFileSync(idle.snapshotFile!));
      const result = await holdStreams(target, n, { whileHeld: () => probe(wantSnapshot), body });
      const held = result.held as ProbedMemory;
      if (wantSnapshot) {
        const heldSnapshot = join(values['keep-snapshots'] ?? dir, 'held.heapsnapshot');
        renameSync(held.snapshotFile!, heldSnapshot);
        snapshots = { idle: idleSnapshot!, held: heldSnapshot, n: result.open };
      }
      const perStream: Record<string, number> = { rssSampled: (result.rssLoadedBytes - result.rssIdleBytes) / result.open };
      for (const f of fields) perStream[f] = (held[f] - idle[f]) / result.open;
      rows.push({ run, n, perStream, held, idle });
      process.stdout.write(
        `${String(run).padEnd(4)} ${String(n).padStart(5)} ${String(result.open).padStart(5)}    ${kb(perStream.rssSampled!)}` +
          `  ${fields.map((f) => kb(perStream[f]!)).join('   ')}   ${(idle.heapUsed / 2 ** 20).toFixed(1)}\n`,
      );
      await sleep(1000);
    }
  }
  // The slope between the two sizes: what one more held stream costs, fixed costs of a burst left out.
  const [small, large] = [Math.min(...sizes), Math.max(...sizes)];
  process.stdout.write(`\nslope between ${small} and ${large} held streams, KB per stream (held figures after a forced collection):\n`);
  for (let run = 1; run <= runs; run++) {
    const a = rows.find((r) => r.run === run && r.n === small)!;
    const b = rows.find((r) => r.run === run && r.n === large)!;
    const slope = (f: (typeof fields)[number]) => (b.held[f] - a.held[f]) / (large - small);
    process.stdout.write(`  run ${run}: ${fields.map((f) => `${f} ${kb(slope(f)).trim()}`).join(', ')}\n`);
  }
  if (snapshots) {
    process.stdout.write(`\nheap snapshot, ${snapshots.n} held streams against none, per stream, by constructor:\n`);
    const lines = heapDiffLines(
      readHeapSnapshot(snapshots.idle, values.detail),
      readHeapSnapshot(snapshots.held, values.detail),
      snapshots.n,
      Number(values.top),
    );
    process.stdout.write(`${lines.join('\n')}\n`);
    process.stdout.write(`\nthe same, per stream, by what holds it (bench/heap-owners.ts: the head of each new subtree of the dominator tree):\n`);
    const read = (file: string) => JSON.parse(readFileSync(file, 'utf8'));
    const owners = heapOwners(read(snapshots.idle), read(snapshots.held), snapshots.n);
    process.stdout.write(`${heapOwnerLines(owners, Number(values.top)).join('\n')}\n`);
  }
});
