import { readFileSync } from 'node:fs';

/**
 * Who holds what a held stream costs. heap-diff.ts counts objects by their own size, which charges a
 * stream's bytes to the strings, arrays and contexts that make them up, not to what keeps them: a
 * StreamPump's own 104 bytes say nothing of the event text it keeps. Here the objects new in the
 * second snapshot (their ids absent from the first: both snapshots from one process) are charged to
 * the root of the new subtree they belong to in the dominator tree (the object whose removal would free
 * them), and those roots are counted by what they are, per one of the `n` things held.
 *
 * The dominator tree is computed over strong edges (weak ones keep nothing) by Cooper, Harvey and
 * Kennedy's iterative algorithm over a depth-first post-order from the snapshot's root. An object that
 * two new things reach (a context shared by two closures of one stream) is charged to their nearest
 * common dominator, which may be old (the GC roots): such bytes appear under the new object that heads
 * them, never twice.
 * Usage: node --import tsx bench/heap-owners.ts BEFORE.heapsnapshot AFTER.heapsnapshot N [--top 30] [--drill Name,Name]
 */

interface RawSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}

/** One snapshot as a graph of node indexes, with what the dominator tree needs. */
class HeapGraph {
  readonly count: number;
  private readonly width: number;
  private readonly edgeWidth: number;
  private readonly firstEdge: Uint32Array;
  private readonly field: Record<'type' | 'name' | 'size' | 'edges' | 'id' | 'edgeType' | 'edgeName' | 'edgeTo', number>;
  private readonly weakEdge: number;

  constructor(readonly raw: RawSnapshot) {
    const { node_fields: nodeFields, edge_fields: edgeFields, edge_types: edgeTypes } = raw.snapshot.meta;
    this.width = nodeFields.length;
    this.edgeWidth = edgeFields.length;
    this.field = {
      type: nodeFields.indexOf('type'),
      name: nodeFields.indexOf('name'),
      size: nodeFields.indexOf('self_size'),
      edges: nodeFields.indexOf('edge_count'),
      id: nodeFields.indexOf('id'),
      edgeType: edgeFields.indexOf('type'),
      edgeName: edgeFields.indexOf('name_or_index'),
      edgeTo: edgeFields.indexOf('to_node'),
    };
    this.weakEdge = edgeTypes[0].indexOf('weak');
    this.count = raw.nodes.length / this.width;
    this.firstEdge = new Uint32Array(this.count + 1);
    for (let i = 0, e = 0; i < this.count; i++) {
      this.firstEdge[i] = e;
      e += raw.nodes[i * this.width + this.field.edges]! * this.edgeWidth;
    }
    this.firstEdge[this.count] = raw.edges.length;
  }

  id(node: number): number {
    return this.raw.nodes[node * this.width + this.field.id]!;
  }

  ownSize(node: number): number {
    return this.raw.nodes[node * this.width + this.field.size]!;
  }

  type(node: number): string {
    return this.raw.snapshot.meta.node_types[0][this.raw.nodes[node * this.width + this.field.type]!]!;
  }

  name(node: number): string {
    return this.raw.strings[this.raw.nodes[node * this.width + this.field.name]!]!;
  }

  /** The nodes `node` holds strongly. */
  *targets(node: number): Generator<number> {
    for (let e = this.firstEdge[node]!; e < this.firstEdge[node + 1]!; e += this.edgeWidth) {
      if (this.raw.edges[e + this.field.edgeType] !== this.weakEdge) yield this.raw.edges[e + this.field.edgeTo]! / this.width;
    }
  }

  /** A plain object's first property names (its shape is what tells one apart). */
  propertyNames(node: number, max: number): string[] {
    const names: string[] = [];
    const edgeTypes = this.raw.snapshot.meta.edge_types[0];
    for (let e = this.firstEdge[node]!; e < this.firstEdge[node + 1]! && names.length < max; e += this.edgeWidth) {
      if (edgeTypes[this.raw.edges[e + this.field.edgeType]!] === 'property') names.push(this.raw.strings[this.raw.edges[e + this.field.edgeName]!]!);
    }
    return names;
  }
}

/** The immediate dominator of every node reachable from node 0 (-1 for the rest), and each node's retained size. */
export function dominators(graph: HeapGraph): { idom: Int32Array; retained: Float64Array } {
  const n = graph.count;
  // Predecessors in one flat array (a list per node would cost seconds on a snapshot of a million nodes).
  const predecessorCount = new Uint32Array(n + 1);
  for (let node = 0; node < n; node++) for (const to of graph.targets(node)) predecessorCount[to]!++;
  const predecessorStart = new Uint32Array(n + 1);
  for (let node = 0; node < n; node++) predecessorStart[node + 1] = predecessorStart[node]! + predecessorCount[node]!;
  const predecessors = new Uint32Array(predecessorStart[n]!);
  const filled = predecessorStart.slice();
  for (let node = 0; node < n; node++) for (const to of graph.targets(node)) predecessors[filled[to]!++] = node;

  const postIndex = new Int32Array(n).fill(-1);
  const postOrder: number[] = [];
  const visited = new Uint8Array(n);
  const stack: Array<{ node: number; next: Generator<number> }> = [{ node: 0, next: graph.targets(0) }];
  visited[0] = 1;
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    const step = top.next.next();
    if (step.done) {
      stack.pop();
      postIndex[top.node] = postOrder.length;
      postOrder.push(top.node);
    } else if (!visited[step.value]) {
      visited[step.value] = 1;
      stack.push({ node: step.value, next: graph.targets(step.value) });
    }
  }
  const idom = new Int32Array(n).fill(-1);
  idom[0] = 0;
  const intersect = (a: number, b: number) => {
    while (a !== b) {
      while (postIndex[a]! < postIndex[b]!) a = idom[a]!;
      while (postIndex[b]! < postIndex[a]!) b = idom[b]!;
    }
    return a;
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (let k = postOrder.length - 1; k >= 0; k--) {
      const node = postOrder[k]!;
      if (node === 0) continue;
      let next = -1;
      for (let p = predecessorStart[node]!; p < predecessorStart[node + 1]!; p++) {
        const from = predecessors[p]!;
        if (postIndex[from]! >= 0 && idom[from]! >= 0) next = next < 0 ? from : intersect(from, next);
      }
      if (next >= 0 && idom[node] !== next) {
        idom[node] = next;
        changed = true;
      }
    }
  }
  const retained = new Float64Array(n);
  for (let i = 0; i < n; i++) retained[i] = graph.ownSize(i);
  for (const node of postOrder) {
    if (node !== 0) retained[idom[node]!] = retained[idom[node]!]! + retained[node]!;
  }
  return { idom, retained };
}

const STRING_TYPES = new Set(['string', 'concatenated string', 'sliced string']);

function label(graph: HeapGraph, node: number): string {
  const type = graph.type(node);
  const name = graph.name(node);
  if (STRING_TYPES.has(type)) return `${type}: ${JSON.stringify(name.slice(0, 40))}`;
  if (type === 'object' && name === 'Object') return `object: {${graph.propertyNames(node, 5).join(',')}}`;
  return `${type}: ${name.slice(0, 80)}`;
}

export interface OwnerRow {
  owner: string;
  /** Bytes retained per thing held, by the new subtrees this kind of object heads. */
  bytes: number;
  /** Such subtrees per thing held. */
  count: number;
}

/** The new memory of `after` over `before`, charged to the heads of its subtrees, largest first. */
export function heapOwners(
  before: RawSnapshot,
  after: RawSnapshot,
  n: number,
): { total: number; rows: OwnerRow[]; graph: HeapGraph; isNew: (node: number) => boolean; retained: Float64Array; idom: Int32Array } {
  const old = new HeapGraph(before);
  const oldIds = new Set<number>();
  for (let i = 0; i < old.count; i++) oldIds.add(old.id(i));
  const graph = new HeapGraph(after);
  const { idom, retained } = dominators(graph);
  const isNew = (node: number) => !oldIds.has(graph.id(node));
  const sums = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let node = 1; node < graph.count; node++) {
    if (idom[node]! < 0 || !isNew(node) || isNew(idom[node]!)) continue;
    const owner = label(graph, node);
    const sum = sums.get(owner) ?? { bytes: 0, count: 0 };
    sum.bytes += retained[node]!;
    sum.count++;
    sums.set(owner, sum);
    total += retained[node]!;
  }
  const rows = [...sums].map(([owner, sum]) => ({ owner, bytes: sum.bytes / n, count: sum.count / n }));
  return { total: total / n, rows: rows.sort((a, b) => b.bytes - a.bytes), graph, isNew, retained, idom };
}

export function heapOwnerLines(result: ReturnType<typeof heapOwners>, top: number, drill: string[] = []): string[] {
  const lines = [
    `  ${result.total.toFixed(0).padStart(7)} B  in all, retained by new objects (a native or external buffer's memory outside the V8 heap is not in a snapshot)`,
    '     bytes   holders  what heads the new memory',
    ...result.rows.slice(0, top).map((r) => `  ${r.bytes.toFixed(0).padStart(7)} B  ${r.count.toFixed(2).padStart(7)}  ${r.owner}`),
  ];
  const { graph, idom, retained, isNew } = result;
  const children = new Map<number, number[]>();
  for (let node = 1; node < graph.count; node++) {
    if (idom[node]! < 0) continue;
    const list = children.get(idom[node]!);
    if (list) list.push(node);
    else children.set(idom[node]!, [node]);
  }
  const tree = (node: number, depth: number): string[] =>
    (children.get(node) ?? [])
      .filter((c) => retained[c]! >= 48)
      .sort((a, b) => retained[b]! - retained[a]!)
      .slice(0, 6)
      .flatMap((c) => [`  ${'  '.repeat(depth)}${retained[c]!.toFixed(0).padStart(6)} B  ${label(graph, c)}`, ...(depth < 4 ? tree(c, depth + 1) : [])]);
  for (const name of drill) {
    const first = Array.from({ length: graph.count }, (_, i) => i).find((i) => isNew(i) && graph.type(i) === 'object' && graph.name(i) === name);
    if (first === undefined) lines.push(`\n  no new ${name}`);
    else lines.push(`\n  one new ${name}, ${retained[first]!.toFixed(0)} B retained:`, ...tree(first, 1));
  }
  return lines;
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const args = process.argv.slice(2);
  const option = (flag: string) => {
    const at = args.indexOf(flag);
    return at >= 0 ? args.splice(at, 2)[1] : undefined;
  };
  const top = Number(option('--top') ?? 30);
  const drill = option('--drill')?.split(',') ?? [];
  const [before, after, n] = args;
  if (!before || !after || !n) {
    process.stderr.write('usage: node --import tsx bench/heap-owners.ts BEFORE.heapsnapshot AFTER.heapsnapshot N [--top 30] [--drill Name,Name]\n');
    process.exit(2);
  }
  const read = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as RawSnapshot;
  process.stdout.write(`${heapOwnerLines(heapOwners(read(before), read(after), Number(n)), top, drill).join('\n')}\n`);
}
