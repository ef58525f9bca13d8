import { readFileSync } from 'node:fs';
import { functionLabel, moduleOf } from './profile-summary.ts';

/**
 * Summarises a sampling heap profile written by bench/profile-heap-sampler.mjs: the bytes the
 * process allocated over the loaded window (freed ones included), per request, by the function that
 * allocated them, by module, and by the nearest frame of Tollgate's own code on the stack (the
 * site to change: a Fastify or JSON.stringify allocation is charged to the Tollgate code that asked for it).
 * Usage: node --import tsx bench/profile-heap.ts FILE.heapprofile.json REQUESTS [--top N]
 */
interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}
export interface HeapFile {
  profile: { head: HeapNode };
  gc: { scavenges: number; scavengeMs: number; markSweeps: number; markSweepMs: number; other: number; otherMs: number };
}

export interface HeapSummary {
  totalBytes: number;
  byFunction: Array<{ name: string; bytes: number }>;
  byModule: Array<{ name: string; bytes: number }>;
  byOwnSite: Array<{ name: string; bytes: number }>;
}

const isOwn = (frame: HeapNode['callFrame']) => /\/(src|dist)\//.test(frame.url) && !frame.url.includes('/node_modules/');

export function summariseHeap(head: HeapNode): HeapSummary {
  const byFunction = new Map<string, number>();
  const byModule = new Map<string, number>();
  const byOwnSite = new Map<string, number>();
  const add = (m: Map<string, number>, key: string, bytes: number) => m.set(key, (m.get(key) ?? 0) + bytes);
  let totalBytes = 0;
  // Depth first with an explicit stack: the tree is as deep as the deepest call chain.
  const pending: Array<{ node: HeapNode; own: string | undefined }> = [{ node: head, own: undefined }];
  while (pending.length > 0) {
    const { node, own: above } = pending.pop()!;
    const own = isOwn(node.callFrame) ? functionLabel(node.callFrame) : above;
    if (node.selfSize > 0) {
      totalBytes += node.selfSize;
      add(byFunction, functionLabel(node.callFrame), node.selfSize);
      add(byModule, moduleOf(node.callFrame), node.selfSize);
      add(byOwnSite, own ?? `(no Tollgate frame: ${moduleOf(node.callFrame)})`, node.selfSize);
    }
    for (const child of node.children) pending.push({ node: child, own });
  }
  const sorted = (m: Map<string, number>) => [...m].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
  return { totalBytes, byFunction: sorted(byFunction), byModule: sorted(byModule), byOwnSite: sorted(byOwnSite) };
}

/** The summary as text, in bytes per request; the collections V8 ran over the same window beside it. */
export function heapSummaryLines(file: HeapFile, requests: number, top = 25): string[] {
  const s = summariseHeap(file.profile.head);
  const perRequest = (bytes: number) => `${(bytes / requests).toFixed(0).padStart(7)} B`;
  const rows = (list: HeapSummary['byModule']) => list.slice(0, top).map((r) => `  ${perRequest(r.bytes)}  ${r.name}`);
  const { gc } = file;
  return [
    `allocated ${(s.totalBytes / requests).toFixed(0)} bytes per request (sampled, freed objects included; ${requests} requests)`,
    `garbage collection over the window: young ${((1000 * gc.scavenges) / requests).toFixed(2)} per 1,000 requests, ${((1000 * gc.scavengeMs) / requests).toFixed(1)} µs ` +
      `per request; full ${((1000 * gc.markSweeps) / requests).toFixed(2)} per 1,000, ${((1000 * gc.markSweepMs) / requests).toFixed(1)} µs per request`,
    '',
    'by module that allocated:',
    ...rows(s.byModule),
    '',
    'by the nearest Tollgate frame on the stack (the call site to change):',
    ...rows(s.byOwnSite),
    '',
    'by function that allocated:',
    ...rows(s.byFunction),
  ];
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const [file, requests, flag, n] = process.argv.slice(2);
  if (!file || !requests) {
    process.stderr.write('usage: node --import tsx bench/profile-heap.ts FILE.heapprofile.json REQUESTS [--top N]\n');
    process.exit(2);
  }
  const top = flag === '--top' ? Number(n) : 25;
  process.stdout.write(`${heapSummaryLines(JSON.parse(readFileSync(file, 'utf8')) as HeapFile, Number(requests), top).join('\n')}\n`);
}
