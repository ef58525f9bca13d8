import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';

/**
 * The docs say where things are; these checks keep them from going stale: the folder map
 * at the top of docs/development.md names exactly the folders of src/, and every repository path
 * the README and docs/*.md cite exists. Pure reads of the tree, no services.
 */
const ROOT = join(import.meta.dirname, '..', '..');

interface MapEntry {
  /** src-relative, folders without their trailing slash: `payments/relayer`, `main.ts`. */
  path: string;
  folder: boolean;
  depth: number;
}

/**
 * The map's entries. An entry line is indented two spaces per level under `src/` and starts with
 * one name or a comma-separated list (`cli/, demo/`); a name ending in `/` is a folder. Deeper
 * indented lines continue the description above them.
 */
function readFolderMap(markdown: string): MapEntry[] {
  const block = /```\n(src\/\n[\s\S]*?)```/.exec(markdown);
  assert.ok(block, 'docs/development.md has a code block that starts with src/');
  const entries: MapEntry[] = [];
  const parents: string[] = [];
  for (const line of block[1]!.split('\n').slice(1)) {
    if (!line.startsWith(' ')) break; // back at column 0: the map of src/ is over (test/ follows)
    const m = /^( +)(\S+(?:, \S+)*)(?: {2,}|$)/.exec(line);
    const depth = m ? m[1]!.length / 2 : 0;
    if (!m || !Number.isInteger(depth) || depth > 3) continue; // a continued description
    parents.length = depth - 1;
    for (const name of m[2]!.split(', ')) {
      const folder = name.endsWith('/');
      const path = [...parents, name.replace(/\/$/, '')].join('/');
      entries.push({ path, folder, depth });
    }
    const last = m[2]!.split(', ').at(-1)!;
    if (last.endsWith('/')) parents[depth - 1] = last.replace(/\/$/, '');
  }
  return entries;
}

function foldersOf(dir: string, depth: number, prefix = ''): string[] {
  if (depth === 0) return [];
  return readdirSync(join(dir, prefix), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => {
      const path = prefix ? `${prefix}/${e.name}` : e.name;
      return [path, ...foldersOf(dir, depth - 1, path)];
    });
}

/**
 * Paths such as `src/metered/run.ts` or test/support/ written anywhere in a document. A glob
 * (test/outages/start-with-*.test.ts) is checked as the folder it is in; what only exists once a
 * command has installed it (bench/node_modules) is left out.
 */
function citedPaths(markdown: string): string[] {
  const found = markdown.match(/(?<![\w./@-])(?:src|test|scripts|bench|docs|deploy|web|bin|contracts|\.ci)\/[\w./@*-]*[\w/*]/g) ?? [];
  const paths = found.map((p) => (p.includes('*') ? p.slice(0, p.lastIndexOf('/', p.indexOf('*')) + 1) : p)).filter((p) => !p.includes('node_modules'));
  return [...new Set(paths)];
}

/** Relative Markdown link targets (`[x](operations.md#y)`), resolved against the document's folder. */
function linkedPaths(markdown: string, doc: string): string[] {
  const targets = [...markdown.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)].map((m) => m[1]!).filter((t) => !/^[a-z]+:/.test(t));
  return targets.map((t) => join(dirname(doc), t));
}

describe('the folder map in docs/development.md', () => {
  const entries = readFolderMap(readFileSync(join(ROOT, 'docs', 'development.md'), 'utf8'));
  const depth = Math.max(...entries.map((e) => e.depth));

  test('names every folder of src/ to the depth it goes, and no folder that does not exist', () => {
    const named = entries
      .filter((e) => e.folder)
      .map((e) => e.path)
      .sort();
    assert.deepEqual(named, foldersOf(join(ROOT, 'src'), depth).sort());
  });

  test('every file it names exists', () => {
    for (const e of entries.filter((x) => !x.folder)) assert.ok(existsSync(join(ROOT, 'src', e.path)), `src/${e.path}`);
  });

  test('the reader finds folders at each level, so the comparison above cannot pass on nothing', () => {
    const sample = readFolderMap('```\nsrc/\n  a.ts, b/  x\n  c/          y\n                z/ a description\n    d/   w\ntest/\n```\n');
    assert.deepEqual(
      sample.map((e) => e.path),
      ['a.ts', 'b', 'c', 'c/d'],
    );
    assert.ok(entries.length > 20 && depth >= 2);
  });
});

describe('paths cited in the documentation exist', () => {
  const docs = [
    'README.md',
    'SECURITY.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];
  for (const doc of docs) {
    test(doc, () => {
      const text = readFileSync(join(ROOT, doc), 'utf8');
      const missing = [...citedPaths(text), ...linkedPaths(text, doc)].filter((p) => !existsSync(join(ROOT, p)));
      assert.deepEqual(missing, [], `${doc} cites paths that do not exist`);
    });
  }

  test('the path finder finds paths and only paths', () => {
    const text = 'see `src/metered/run.ts`, test/support/, deploy/systemd/tollgate@.service and test/chat/*-codec.test.ts; not /v1/usage/x or a/src/b.';
    assert.deepEqual(citedPaths(text), ['src/metered/run.ts', 'test/support/', 'deploy/systemd/tollgate@.service', 'test/chat/']);
  });
});
