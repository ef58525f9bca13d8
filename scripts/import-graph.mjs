#!/usr/bin/env node
// The import graph of src/, and the layering rules it must keep (docs/development.md):
//   - no import cycle between files, and none between folders (src/<folder>/…; a file directly in
//     src/ is its own node);
//   - nothing below the HTTP layer imports Fastify or the `Services` container (src/services.ts):
//     only the composition root and the HTTP layer may (see LAYER_ROOTS below);
//   - the HTTP layer (src/http/) imports no ledger module and no payment store: it maps what the
//     workflows below it decide (src/metered/, src/payments/paid-request/) to the wire, and never moves
//     or reads money itself (see FORBIDDEN_IN_HTTP below).
// Imports are read with TypeScript's own pre-processor (no type-checking, so it takes well under a
// second); type-only imports count too, since a cycle of types is still a cycle of concepts.
//   node scripts/import-graph.mjs            print the report; exit 1 when a rule is broken
//   node scripts/import-graph.mjs --json     the report as JSON
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

/**
 * Where Fastify and the `Services` container may be imported: the HTTP layer, the composition root
 * that builds services and the app, and the entry points that start them.
 */
const LAYER_ROOTS = ['http/', 'app.ts', 'services.ts', 'main.ts', 'cli/', 'demo/', 'dashboard/'];
const FORBIDDEN_BELOW_HTTP = [
  { what: 'fastify', test: (spec) => spec === 'fastify' || spec.startsWith('fastify/') || spec.startsWith('@fastify/') },
  { what: 'services.ts', test: (_spec, target) => target === 'services.ts' },
];

/**
 * What src/http/ may not import: money moves and payment states are written only below it, by the
 * workflows that decide (a route asks src/payments/paid-request/ or src/metered/ and maps the outcome).
 * A payment store is any `*-store.ts` under src/payments/ (payment-store.ts, upto/upto-store.ts,
 * pay-per-request/identifier-store.ts, …); a type it re-exports is imported from its own file.
 */
export const FORBIDDEN_IN_HTTP = [
  { what: 'a ledger module', test: (target) => target.startsWith('ledger/') },
  { what: 'a payment store', test: (target) => target.startsWith('payments/') && /-store\.ts$/.test(target) },
];

function sourceFiles() {
  return readdirSync(SRC, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.(ts|mts)$/.test(e.name) && !e.name.endsWith('.d.ts'))
    .map((e) =>
      relative(SRC, join(e.parentPath ?? e.path, e.name))
        .split('\\')
        .join('/'),
    )
    .sort();
}

/** Each file's imports: `{spec, target}` where target is the src-relative file for a relative import. */
function importsOf(file) {
  const text = readFileSync(join(SRC, file), 'utf8');
  const info = ts.preProcessFile(text, true, true);
  return info.importedFiles.map(({ fileName: spec }) => {
    if (!spec.startsWith('.')) return { spec, target: null };
    const target = relative(SRC, resolve(dirname(join(SRC, file)), spec))
      .split('\\')
      .join('/');
    return { spec, target };
  });
}

/** The folder a file belongs to: its first directory under src/, or the file itself at the top. */
export function folderOf(file) {
  const slash = file.indexOf('/');
  return slash === -1 ? file : file.slice(0, slash);
}

/** Strongly connected components of more than one node (or a node importing itself): the cycles. */
export function cycles(nodes, edges) {
  let index = 0;
  const stack = [];
  const on = new Set();
  const idx = new Map();
  const low = new Map();
  const found = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (edges.get(v) ?? new Set()).has(v)) found.push(component.sort());
    }
  };
  for (const n of nodes) if (!idx.has(n)) visit(n);
  return found;
}

export function importGraphReport() {
  const files = sourceFiles();
  const known = new Set(files);
  const fileEdges = new Map();
  const folderEdges = new Map();
  /** For each folder pair a → b, one file import that makes it, so a report names where to look. */
  const folderWitness = new Map();
  const forbidden = [];
  const httpForbidden = [];
  for (const file of files) {
    const out = new Set();
    for (const { spec, target } of importsOf(file)) {
      if (target !== null && known.has(target)) {
        out.add(target);
        const [from, to] = [folderOf(file), folderOf(target)];
        if (from !== to) {
          if (!folderEdges.has(from)) folderEdges.set(from, new Set());
          folderEdges.get(from).add(to);
          if (!folderWitness.has(`${from} → ${to}`)) folderWitness.set(`${from} → ${to}`, `${file} → ${target}`);
        }
      }
      if (file.startsWith('http/') && target !== null) {
        for (const rule of FORBIDDEN_IN_HTTP) if (rule.test(target)) httpForbidden.push({ file, imports: `${rule.what} (${target})` });
      }
      if (LAYER_ROOTS.some((root) => file === root || file.startsWith(root))) continue;
      for (const rule of FORBIDDEN_BELOW_HTTP) if (rule.test(spec, target)) forbidden.push({ file, imports: rule.what });
    }
    fileEdges.set(file, out);
  }
  const folders = [...new Set(files.map(folderOf))];
  const folderCycles = cycles(folders, folderEdges).map((members) => ({
    members,
    edges: [...folderWitness]
      .filter(([pair]) => members.includes(pair.split(' → ')[0]) && members.includes(pair.split(' → ')[1]))
      .map(([pair, via]) => `${pair} (${via})`),
  }));
  // The pairs that import each other directly: the first edges to cut inside a large cycle.
  const mutualPairs = [...folderWitness.keys()]
    .map((pair) => pair.split(' → '))
    .filter(([a, b]) => a < b && folderEdges.get(b)?.has(a))
    .map(([a, b]) => `${a} ⇄ ${b} (${folderWitness.get(`${a} → ${b}`)}; ${folderWitness.get(`${b} → ${a}`)})`);
  return { files: files.length, fileCycles: cycles(files, fileEdges), folderCycles, mutualPairs, forbidden, httpForbidden };
}

export function isClean(report) {
  return report.fileCycles.length === 0 && report.folderCycles.length === 0 && report.forbidden.length === 0 && report.httpForbidden.length === 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const report = importGraphReport();
  if (process.argv.includes('--json')) console.log(JSON.stringify(report, null, 2));
  else {
    console.log(`${report.files} files under src/`);
    console.log(`file cycles: ${report.fileCycles.length}`);
    for (const c of report.fileCycles) console.log(`  ${c.join(' ⇄ ')}`);
    console.log(`folder cycles: ${report.folderCycles.length}`);
    for (const c of report.folderCycles) console.log(`  ${c.members.join(' ⇄ ')}\n    ${c.edges.join('\n    ')}`);
    console.log(`folder pairs importing each other: ${report.mutualPairs.length}`);
    for (const p of report.mutualPairs) console.log(`  ${p}`);
    console.log(`Fastify or services.ts below the HTTP layer: ${report.forbidden.length}`);
    for (const f of report.forbidden) console.log(`  ${f.file} imports ${f.imports}`);
    console.log(`a ledger module or a payment store imported by src/http/: ${report.httpForbidden.length}`);
    for (const f of report.httpForbidden) console.log(`  ${f.file} imports ${f.imports}`);
  }
  process.exit(isClean(report) ? 0 : 1);
}
