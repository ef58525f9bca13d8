import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { allBlocks, blocksIn } from '../../scripts/doc-blocks.mjs';

/**
 * Every code block of README.md and docs/*.md that a user would run is run by a test, or says why
 * not. The marker is an HTML comment on the line before the fence (scripts/doc-blocks.mjs,
 * docs/development.md): `<!-- runs: test/….test.ts#id -->` or `<!-- illustrative: reason -->`.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const where = (b: { file: string; line: number }) => `${b.file}:${b.line}`;

describe('doc code blocks: run by a test, or marked illustrative with a reason', () => {
  const blocks = allBlocks(ROOT);

  test('every runnable block (sh, bash, js, ts, python, …) carries a marker', () => {
    const unmarked = blocks.filter((b) => b.runnable && !b.marker).map((b) => `${where(b)} (${b.language})`);
    assert.deepEqual(unmarked, [], 'add <!-- runs: test/…#id --> or <!-- illustrative: reason --> on the line before each fence');
  });

  test('an illustrative block gives a reason', () => {
    const bare = blocks.filter((b) => b.marker?.kind === 'illustrative' && b.marker.reason.length < 10).map(where);
    assert.deepEqual(bare, []);
  });

  test('a runs: marker names an existing test file that reads the block by its id, and ids are unique', () => {
    const problems: string[] = [];
    const seen = new Map<string, string>();
    for (const b of blocks) {
      if (b.marker?.kind !== 'runs') continue;
      const { test: file, id } = b.marker;
      if (!id) problems.push(`${where(b)}: no #id after ${file}`);
      if (seen.has(id)) problems.push(`${where(b)}: id ${id} is also used at ${seen.get(id)}`);
      seen.set(id, where(b));
      if (!/^test\/.+\.test\.ts$/.test(file) || !existsSync(join(ROOT, file))) {
        problems.push(`${where(b)}: ${file} is not a test file`);
        continue;
      }
      // The test runs the block's own text, read from the markdown by its id, so the two cannot drift.
      if (!readFileSync(join(ROOT, file), 'utf8').includes(`docBlock('${id}')`)) problems.push(`${where(b)}: ${file} never reads docBlock('${id}')`);
    }
    assert.deepEqual(problems, []);
  });

  test('the checker itself: markers, languages and fences are read as documented', () => {
    const md = [
      '<!-- runs: test/docs/examples.test.ts#a -->',
      '```sh',
      'curl x',
      '```',
      '```json',
      '{}',
      '```',
      '<!-- illustrative: needs a browser -->',
      '   ```ts',
      '   run();',
      '   ```',
      '```bash',
      'echo unmarked',
      '```',
    ].join('\n');
    const found = blocksIn('x.md', md);
    assert.deepEqual(
      found.map((b) => [b.line, b.language, b.runnable, b.marker?.kind ?? null, b.text]),
      [
        [2, 'sh', true, 'runs', 'curl x\n'],
        [5, 'json', false, null, '{}\n'],
        [9, 'ts', true, 'illustrative', 'run();\n'],
        [12, 'bash', true, null, 'echo unmarked\n'],
      ],
    );
    assert.deepEqual(found[0]!.marker, { kind: 'runs', test: 'test/docs/examples.test.ts', id: 'a' });
  });
});
