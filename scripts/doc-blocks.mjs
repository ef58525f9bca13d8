#!/usr/bin/env node
// Every fenced code block of README.md and docs/*.md, with its language and its marker.
// A block a user would run (a command or a program: RUNNABLE_LANGUAGES) carries, on the line just
// before its fence, one of:
//   <!-- runs: test/docs/examples.test.ts#some-id -->   the named test reads this block by its id
//                                                          (docBlock('some-id')) and runs its text
//   <!-- illustrative: why it is not run -->              e.g. needs a real provider, Python, a browser
// Blocks in other languages (json and text output samples, yaml config excerpts, the folder map)
// need no marker. test/architecture/doc-blocks.test.ts fails on a runnable block without a marker,
// a `runs:` test file that does not exist or that does not read the block by its id, and duplicate ids.
//   node scripts/doc-blocks.mjs          lists every block: file:line, language, marker
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
export const RUNNABLE_LANGUAGES = [
  'sh',
  'bash',
  'shell',
  'console',
  'zsh',
  'js',
  'javascript',
  'mjs',
  'ts',
  'typescript',
  'tsx',
  'python',
  'py',
  'curl',
  'http',
];

/** README.md, then docs/*.md, repository-relative. */
export function docFiles(root = ROOT) {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

const MARKER = /^\s*<!--\s*(runs|illustrative):\s*(.*?)\s*-->\s*$/;

/** The fenced blocks of one markdown text. */
export function blocksIn(file, text) {
  const lines = text.split('\n');
  const blocks = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([\w+-]*)/.exec(lines[i]);
    if (!open) continue;
    const [, indent, fence, language] = open;
    const body = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      if (lines[j].trimStart().startsWith(fence) && lines[j].trim() === lines[j].trim().slice(0, fence.length).padEnd(lines[j].trim().length, fence[0])) break;
      body.push(lines[j].startsWith(indent) ? lines[j].slice(indent.length) : lines[j]);
    }
    const m = i > 0 ? MARKER.exec(lines[i - 1]) : null;
    let marker = null;
    if (m && m[1] === 'runs') {
      const [test, id] = m[2].split('#');
      marker = { kind: 'runs', test: test.trim(), id: (id ?? '').trim() };
    } else if (m) marker = { kind: 'illustrative', reason: m[2] };
    blocks.push({
      file,
      line: i + 1,
      language: language.toLowerCase(),
      runnable: RUNNABLE_LANGUAGES.includes(language.toLowerCase()),
      marker,
      text: body.join('\n') + '\n',
    });
    i = j;
  }
  return blocks;
}

/** Every block of every doc file. */
export function allBlocks(root = ROOT) {
  return docFiles(root).flatMap((f) => blocksIn(f, readFileSync(join(root, f), 'utf8')));
}

/** The text of the block marked `runs: …#id`; throws if there is none or several. */
export function docBlock(id, root = ROOT) {
  const found = allBlocks(root).filter((b) => b.marker?.kind === 'runs' && b.marker.id === id);
  if (found.length !== 1) throw new Error(`${found.length} doc blocks are marked with the id ${id}`);
  return found[0].text;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const blocks = allBlocks();
  for (const b of blocks) {
    const m = b.marker
      ? b.marker.kind === 'runs'
        ? `runs ${b.marker.test}#${b.marker.id}`
        : `illustrative: ${b.marker.reason}`
      : b.runnable
        ? 'UNMARKED'
        : '-';
    console.log(`${b.file}:${b.line}\t${b.language || '(none)'}\t${m}`);
  }
  const runnable = blocks.filter((b) => b.runnable);
  const runs = blocks.filter((b) => b.marker?.kind === 'runs').length;
  const illustrative = blocks.filter((b) => b.marker?.kind === 'illustrative').length;
  console.log(
    `${blocks.length} blocks: ${runnable.length} runnable, ${runs} run by tests, ${illustrative} illustrative, ${runnable.filter((b) => !b.marker).length} unmarked`,
  );
}
