import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, test } from 'node:test';
import ts from 'typescript';

/**
 * Every repository path a comment in src/ or test/ cites exists, so a comment cannot send a reader
 * to a file that was renamed, moved or never written. A cited path is a token with a repository
 * folder prefix (`src/metered/run.ts`, `test/support/`, `docs/DECISIONS.md`, `../shared/DESIGN.md`) or
 * a file name with a known extension (`settle-upto.ts`, `README.md`). A prefixed path must exist from
 * the repository root; a bare name must be a repository file seen from the root, from the citing
 * file's folder, or as the tail of some file's path (`upto/upto-store.ts`). Comments are read with
 * TypeScript's own parser, so `//` inside a string or a URL is not taken for one.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', '.git', 'data']);

/**
 * Names that comments use for files that are not in the repository on purpose: the operator's own
 * config file, the dashboard bundle's built file, a client's config file a test writes, and files
 * of other projects (x402's specification, Permit2's sources).
 */
const NOT_REPOSITORY_FILES = new Set([
  'tollgate.yaml',
  './tollgate.yaml',
  'app.js',
  'opencode.json',
  'extensions/bazaar.md',
  'scheme_upto_evm.md',
  'EIP712.sol',
]);

const PREFIXED = /(?<![\w./@-])(?:\.\.\/shared\/|(?:src|test|scripts|bench|docs|deploy|web|bin|contracts|\.ci)\/)[\w./@*-]*[\w/*]/g;
const WITH_EXTENSION = /(?<![\w./@-])[\w@-][\w./@*-]*\.(?:md|ts|tsx|mts|mjs|js|json|sql|ya?ml|sh|sol|css|html)\b/g;
const HAS_PREFIX = /^(?:\.\.\/shared\/|(?:src|test|scripts|bench|docs|deploy|web|bin|contracts|\.ci)\/)/;

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIPPED_FOLDERS.has(e.name)) return [];
    const path = join(dir, e.name);
    if (e.isDirectory()) return filesUnder(path, keep);
    return keep(e.name) ? [path] : [];
  });
}

/** The comments of one source file, each with the line it starts on. */
function commentsOf(source: string, fileName: string): { line: number; text: string }[] {
  const kind = fileName.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, false, kind);
  const found = new Map<number, string>();
  const add = (ranges: ts.CommentRange[] | undefined) => {
    for (const r of ranges ?? []) found.set(r.pos, source.slice(r.pos, r.end));
  };
  const visit = (node: ts.Node) => {
    add(ts.getLeadingCommentRanges(source, node.getFullStart()));
    add(ts.getTrailingCommentRanges(source, node.end));
    node.forEachChild(visit);
  };
  visit(file);
  add(ts.getLeadingCommentRanges(source, file.endOfFileToken.getFullStart()));
  return [...found].map(([pos, text]) => ({ line: file.getLineAndCharacterOfPosition(pos).line + 1, text }));
}

/** The path-like tokens of one comment; a glob (`test/outages/start-with-*.test.ts`) stands for its folder. */
function citedIn(comment: string): string[] {
  const tokens = [...(comment.match(PREFIXED) ?? []), ...(comment.match(WITH_EXTENSION) ?? [])];
  const paths = tokens.map((p) => (p.includes('*') ? p.slice(0, p.lastIndexOf('/', p.indexOf('*')) + 1) : p));
  return [...new Set(paths)].filter((p) => p !== '' && !p.includes('node_modules') && !NOT_REPOSITORY_FILES.has(p));
}

/** Whether a cited path names something in the repository, seen from the file that cites it. */
function resolves(cited: string, citingFile: string, repositoryFiles: readonly string[]): boolean {
  if (cited.startsWith('../shared/') && !existsSync(join(ROOT, '..', 'shared'))) return true; // shared/ lies beside the clone only
  if (existsSync(join(ROOT, cited))) return true;
  if (HAS_PREFIX.test(cited)) return false;
  if (existsSync(join(ROOT, dirname(citingFile), cited))) return true;
  const tail = `/${cited.replace(/^\.\//, '')}`;
  return repositoryFiles.some((f) => `/${f}`.endsWith(tail));
}

describe('paths cited in the comments of src/ and test/ exist', () => {
  const repositoryFiles = filesUnder(ROOT, () => true).map((f) => relative(ROOT, f));
  const sources = ['src', 'test'].flatMap((d) => filesUnder(join(ROOT, d), (name) => /\.(?:ts|tsx|mts|mjs|js)$/.test(name)));

  test('every one of them', () => {
    const missing: string[] = [];
    let cited = 0;
    for (const file of sources) {
      const rel = relative(ROOT, file);
      for (const comment of commentsOf(readFileSync(file, 'utf8'), file)) {
        for (const path of citedIn(comment.text)) {
          cited++;
          if (!resolves(path, rel, repositoryFiles)) missing.push(`${rel}:${comment.line} cites ${path}`);
        }
      }
    }
    assert.deepEqual(missing, [], 'comments cite paths that do not exist');
    assert.ok(cited > 200, `only ${cited} citations found: the reader is broken`);
  });

  test('the reader takes comments only, and paths only', () => {
    const source = [
      "const url = 'http://example.com/src/not-a-comment.ts'; // see src/metered/run.ts and settle-upto.ts",
      '/** Cites docs/DECISIONS.md, test/support/ and test/chat/*-codec.test.ts; not /v1/usage/x.ts or a/src/b. */',
      'const re = /\\/\\/ src\\/regex.ts/;',
    ].join('\n');
    const comments = commentsOf(source, 'sample.ts');
    assert.deepEqual(
      comments.map((c) => c.line),
      [1, 2],
    );
    assert.deepEqual(comments.flatMap((c) => citedIn(c.text)).sort(), [
      'docs/DECISIONS.md',
      'settle-upto.ts',
      'src/metered/run.ts',
      'test/chat/',
      'test/support/',
    ]);
  });

  test('a path that does not exist is refused, whether prefixed, bare or relative', () => {
    const files = ['src/payments/upto/upto-store.ts', 'docs/DECISIONS.md'];
    assert.equal(resolves('upto/upto-store.ts', 'src/ledger/x.ts', files), true);
    assert.equal(resolves('docs/DECISIONS.md', 'src/ledger/x.ts', files), true);
    assert.equal(resolves('DECISIONS-pgbatch.md', 'src/storage/x.ts', files), false);
    assert.equal(resolves('src/config/price-floor.ts', 'src/providers/x.ts', files), false);
    assert.equal(resolves('store.ts', 'src/ledger/x.ts', files), false);
  });
});
