import { readFileSync } from 'node:fs';

/**
 * Two V8 heap snapshots (node:v8 writeHeapSnapshot) compared by what the objects are: counts and
 * own (shallow) bytes per node type and constructor or function name, the difference divided by
 * the streams (or requests) held in the second. Strings are one row per kind (their names are their
 * contents). Usage: node --import tsx bench/heap-diff.ts BEFORE.heapsnapshot AFTER.heapsnapshot N [--top 30] [--detail]
 */
export type HeapCensus = Map<string, { count: number; bytes: number }>;

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
  locations: number[];
}

const STRING_TYPES = new Set(['string', 'concatenated string', 'sliced string']);

/**
 * With `detail`, rows say more than the constructor: a plain object by its first property names, a
 * closure by its script and line, a string by its first characters (the site that made it).
 */
export function readHeapSnapshot(file: string, detail = false): HeapCensus {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const width = fields.length;
  const [typeAt, nameAt, sizeAt, edgeCountAt] = ['type', 'name', 'self_size', 'edge_count'].map((f) => fields.indexOf(f)) as [number, number, number, number];
  const types = s.snapshot.meta.node_types[0];
  const edgeWidth = s.snapshot.meta.edge_fields.length;
  const [edgeTypeAt, edgeNameAt, edgeToAt] = ['type', 'name_or_index', 'to_node'].map((f) => s.snapshot.meta.edge_fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const edgeTypes = s.snapshot.meta.edge_types[0];
  const firstEdge = new Uint32Array(s.nodes.length / width + 1);
  for (let i = 0, e = 0; i < s.nodes.length; i += width) {
    firstEdge[i / width] = e;
    e += s.nodes[i + edgeCountAt]! * edgeWidth;
  }
  const edgesOf = (node: number) => {
    const out: Array<{ type: string; name: string; to: number }> = [];
    for (let e = firstEdge[node]!, end = e + s.nodes[node * width + edgeCountAt]! * edgeWidth; e < end; e += edgeWidth) {
      const type = edgeTypes[s.edges[e + edgeTypeAt]!]!;
      const name = type === 'element' || type === 'hidden' ? String(s.edges[e + edgeNameAt]) : s.strings[s.edges[e + edgeNameAt]!]!;
      out.push({ type, name, to: s.edges[e + edgeToAt]! / width });
    }
    return out;
  };
  const nodeName = (node: number) => s.strings[s.nodes[node * width + nameAt]!]!;
  const nodeType = (node: number) => types[s.nodes[node * width + typeAt]!]!;
  // Closures' source positions: locations are [node offset, script id, line, column].
  const lineOf = new Map<number, string>();
  for (let i = 0; i < (s.locations?.length ?? 0); i += 4) lineOf.set(s.locations[i]! / width, `${s.locations[i + 2]! + 1}`);
  const scriptOf = (closure: number) => {
    const shared = edgesOf(closure).find((e) => e.name === 'shared');
    const script = shared && edgesOf(shared.to).find((e) => e.name === 'script');
    const named = script && edgesOf(script.to).find((e) => e.name === 'name');
    return named ? nodeName(named.to).replace(/^.*\/(node_modules|dist|src)\//, '$1/') : '?';
  };
  const detailOf = (node: number, type: string, name: string) => {
    if (STRING_TYPES.has(type)) return JSON.stringify(name.slice(0, 40));
    if (type === 'closure') return `${name || '(anonymous)'} ${scriptOf(node)}:${lineOf.get(node) ?? '?'}`;
    if (type === 'object' && name === 'Object')
      return `{${edgesOf(node)
        .filter((e) => e.type === 'property')
        .slice(0, 5)
        .map((e) => e.name)
        .join(',')}}`;
    return name.slice(0, 80);
  };
  const census: HeapCensus = new Map();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt]!]!;
    const raw = s.strings[s.nodes[i + nameAt]!]!;
    const name = detail ? detailOf(i / width, nodeType(i / width), raw) : STRING_TYPES.has(type) ? '' : raw.slice(0, 80);
    const key = `${type}: ${name}`;
    const entry = census.get(key) ?? { count: 0, bytes: 0 };
    entry.count++;
    entry.bytes += s.nodes[i + sizeAt]!;
    census.set(key, entry);
  }
  return census;
}

/** The rows that grew most in own bytes from `before` to `after`, per one of the `n` things held. */
export function heapDiffLines(before: HeapCensus, after: HeapCensus, n: number, top = 30): string[] {
  const rows = [...after].map(([key, a]) => {
    const b = before.get(key) ?? { count: 0, bytes: 0 };
    return { key, count: (a.count - b.count) / n, bytes: (a.bytes - b.bytes) / n };
  });
  const total = rows.reduce((sum, r) => sum + r.bytes, 0);
  rows.sort((x, y) => y.bytes - x.bytes);
  return [
    `  ${total.toFixed(0).padStart(7)} B  in all (own sizes; what a native or external buffer holds outside the V8 heap is not in a snapshot)`,
    '     bytes   objects  type: constructor or function',
    ...rows.slice(0, top).map((r) => `  ${r.bytes.toFixed(0).padStart(7)} B  ${r.count.toFixed(2).padStart(7)}  ${r.key}`),
  ];
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const detail = process.argv.includes('--detail');
  const [before, after, n, flag, top] = process.argv.slice(2).filter((a) => a !== '--detail');
  if (!before || !after || !n) {
    process.stderr.write('usage: node --import tsx bench/heap-diff.ts BEFORE.heapsnapshot AFTER.heapsnapshot N [--top 30] [--detail]\n');
    process.exit(2);
  }
  const lines = heapDiffLines(readHeapSnapshot(before, detail), readHeapSnapshot(after, detail), Number(n), flag === '--top' ? Number(top) : 30);
  process.stdout.write(`${lines.join('\n')}\n`);
}
