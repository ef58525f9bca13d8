import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { batchedStdout } from '../../src/http/log-destination.ts';

const ROOT = new URL('../../', import.meta.url);

describe('log lines to standard output', () => {
  test('the lines of one turn of the event loop reach the writer as one write, in order', async () => {
    const writes: string[] = [];
    const out = batchedStdout(() => ({
      write: (text: string) => writes.push(text) > 0,
      flush: () => undefined,
    }));
    for (let i = 0; i < 100; i++) out.write(`line ${i}\n`);
    assert.equal(writes.length, 0, 'handed over at the end of the turn, not line by line');
    await nextTurn();
    assert.deepEqual(writes, [Array.from({ length: 100 }, (_, i) => `line ${i}\n`).join('')]);
    out.write('later\n');
    await nextTurn();
    assert.deepEqual(writes.slice(1), ['later\n']);
  });

  test('lines logged just before process.exit() are all written (the exit flushes what is pending)', () => {
    const script = `
      import { createLogger } from './src/http/logger.ts';
      const log = createLogger('info');
      for (let i = 0; i < 2000; i++) log.info({ i }, 'line');
      process.exit(0);
    `;
    const stdout = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' });
    const numbers = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).i);
    assert.deepEqual(
      numbers,
      Array.from({ length: 2000 }, (_, i) => i),
    );
  });
});
