// Preloaded into a gateway by bench/ttft-phase.ts --probe (`node --import bench/gateway-probe.mjs`):
// what the gateway itself saw during one open-loop phase, without touching its code.
// SIGUSR2 opens a window (everything before it is dropped); the next SIGUSR2 writes the window to
// the file named by TOLLGATE_PROBE_OUT and opens a new one. In the window:
// - the event-loop delay histogram (perf_hooks.monitorEventLoopDelay, 1 ms resolution) and every
//   stall over STALL_MS with when it ended, from a 5 ms ticker (the histogram has no times);
// - every garbage collection (kind, start, duration);
// - for each chat request, the moments of its start, read from channels Node, Fastify and undici
//   publish and from two wrapped ServerResponse methods: the request's first byte, the handler's
//   start (auth, the body read and parsed), the SSE headers written (plan and reservation done),
//   the upstream request created, its headers sent on a socket (the pool's queue and any connect),
//   the upstream's response headers, its first chunk carrying the first word, and that word
//   written to the client;
// - the ledger's group-commit batches, when the gateway publishes them (tollgate:group-commit).
// Times are epoch milliseconds (performance.timeOrigin + now), comparable with the generator's.
import dc from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { monitorEventLoopDelay, PerformanceObserver, performance } from 'node:perf_hooks';

const OUT = process.env.TOLLGATE_PROBE_OUT;
const STALL_MS = 10;
const TICK_MS = 5;
const FIRST_WORD = 'word0';
const now = () => performance.timeOrigin + performance.now();

let window = fresh();
function fresh() {
  return { from: now(), requests: [], stalls: [], gc: [], batches: [], connects: 0 };
}

const loop = monitorEventLoopDelay({ resolution: 1 });
loop.enable();
let lastTick = performance.now();
setInterval(() => {
  const t = performance.now();
  const late = t - lastTick - TICK_MS;
  if (late > STALL_MS) window.stalls.push({ at: performance.timeOrigin + t, ms: late });
  lastTick = t;
}, TICK_MS).unref();

const GC_KINDS = { 1: 'scavenge', 2: 'mark-compact', 4: 'incremental', 8: 'weak-callbacks' };
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    window.gc.push({ at: performance.timeOrigin + e.startTime, ms: e.duration, kind: GC_KINDS[e.detail?.kind] ?? String(e.detail?.kind) });
}).observe({ entryTypes: ['gc'] });

const byRequest = new WeakMap();
const byResponse = new WeakMap();
const byId = new Map();
const byUpstream = new WeakMap();

dc.subscribe('http.server.request.start', ({ request, response }) => {
  if (request.method !== 'POST' || !request.url?.endsWith('/chat/completions')) return;
  const rec = { start: now() };
  byRequest.set(request, rec);
  byResponse.set(response, rec);
  window.requests.push(rec);
});
dc.subscribe('tracing:fastify.request.handler:start', ({ request }) => {
  const rec = request?.raw && byRequest.get(request.raw);
  if (!rec) return;
  rec.handler = now();
  byId.set(String(request.id), rec);
});

const wrap = (name, mark) => {
  const original = http.ServerResponse.prototype[name];
  http.ServerResponse.prototype[name] = function (...args) {
    const rec = byResponse.get(this);
    if (rec) mark(rec, args);
    return original.apply(this, args);
  };
};
wrap('writeHead', (rec) => (rec.headers ??= now()));
wrap('write', (rec, [chunk]) => {
  if (rec.word === undefined && String(chunk).includes(FIRST_WORD)) {
    rec.word = now();
    byId.delete(rec.id);
  }
});

const upstreamId = (headers) => {
  if (!Array.isArray(headers)) return undefined;
  for (let i = 0; i < headers.length; i += 2) if (String(headers[i]).toLowerCase() === 'x-client-request-id') return String(headers[i + 1]);
  return undefined;
};
dc.subscribe('undici:request:create', ({ request }) => {
  const id = upstreamId(request.headers);
  const rec = id && byId.get(id);
  if (!rec) return;
  rec.id = id;
  rec.upstreamCreated = now();
  byUpstream.set(request, rec);
});
dc.subscribe('undici:client:sendHeaders', ({ request }) => {
  const rec = byUpstream.get(request);
  if (rec) rec.upstreamSent = now();
});
dc.subscribe('undici:client:connected', () => void window.connects++);
dc.subscribe('undici:request:headers', ({ request }) => {
  const rec = byUpstream.get(request);
  if (rec) rec.upstreamHeaders = now();
});
dc.subscribe('undici:request:bodyChunkReceived', ({ request, chunk }) => {
  const rec = byUpstream.get(request);
  if (rec && rec.upstreamWord === undefined && chunk.includes(FIRST_WORD)) rec.upstreamWord = now();
});
dc.subscribe('tollgate:group-commit', (batch) => window.batches.push(batch));

process.on('SIGUSR2', () => {
  const done = window;
  const h = loop;
  const delay = { min: h.min / 1e6, mean: h.mean / 1e6, max: h.max / 1e6, p50: h.percentile(50) / 1e6, p90: h.percentile(90) / 1e6 };
  Object.assign(delay, { p99: h.percentile(99) / 1e6, p999: h.percentile(99.9) / 1e6, count: h.count });
  loop.reset();
  window = fresh();
  byId.clear();
  if (OUT) writeFileSync(OUT, JSON.stringify({ ...done, to: now(), loopDelay: delay }));
});
