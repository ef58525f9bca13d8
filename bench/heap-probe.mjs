// Loaded into a gateway (or the reference proxy) by the benchmark's held-stream phase and by
// bench/held-memory.ts (`node --import bench/heap-probe.mjs`, through bench/heap-probe-client.ts), never in
// production: on SIGUSR2 it collects garbage (a full collection through the inspector, twice, so
// what a finaliser freed goes too) and writes the process's memory to $TOLLGATE_HEAP_PROBE_OUT.json.
// When the file $TOLLGATE_HEAP_PROBE_OUT.cmd says `snapshot`, it also writes a heap snapshot to
// $TOLLGATE_HEAP_PROBE_OUT.heapsnapshot. Files are written aside and renamed: the bench reads
// them as soon as their names appear. Plain JavaScript: the gateway runs compiled code, without tsx.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { getHeapStatistics, writeHeapSnapshot } from 'node:v8';

const OUT = process.env.TOLLGATE_HEAP_PROBE_OUT;
// Connected at the first signal: an idle session costs nothing, but no session at all costs less.
let session;
const collect = () => new Promise((resolve, reject) => session.post('HeapProfiler.collectGarbage', (err) => (err ? reject(err) : resolve())));

process.on('SIGUSR2', async () => {
  if (!OUT) return;
  if (!session) {
    session = new Session();
    session.connect();
  }
  await collect();
  await collect();
  const m = process.memoryUsage();
  const heap = getHeapStatistics();
  const memory = {
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    mallocedMemory: heap.malloced_memory,
    handles: process.getActiveResourcesInfo().length,
  };
  const command = existsSync(`${OUT}.cmd`) ? readFileSync(`${OUT}.cmd`, 'utf8').trim() : '';
  if (command === 'snapshot') {
    rmSync(`${OUT}.cmd`);
    renameSync(writeHeapSnapshot(`${OUT}.heapsnapshot.part`), `${OUT}.heapsnapshot`);
  }
  writeFileSync(`${OUT}.json.part`, JSON.stringify(memory));
  renameSync(`${OUT}.json.part`, `${OUT}.json`);
});
