import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import type { SettleRecord } from '../../src/ledger/reservations.ts';
import { SettleSpool } from '../../src/ledger/spool/spool-file.ts';
import { tempDir } from '../support/engines.ts';

const record = (requestId: string): SettleRecord => ({ requestId, wallet: '0xabc', chargeUsdc: 10, usage: { requestId } as never });
const idsIn = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l).requestId);

/**
 * B6 of the 23.4 review: applied lines are forgotten one by one (the slot rewritten without them),
 * and a crash at any point of the rewrite neither loses a line nor leaves one half-written.
 */
describe('the settle spool forgets applied lines one by one', () => {
  const open = () => {
    const dir = tempDir();
    const spool = SettleSpool.open(dir, 'fp');
    return { dir, spool, file: join(dir, 'settle-fp-0.jsonl') };
  };

  test('a slot keeps only the lines not applied; a slot with none left is deleted', () => {
    const { spool, file } = open();
    for (const id of ['a', 'b', 'c']) spool.append(record(id));
    spool.read().forget(new Set(['a', 'c']));
    assert.deepEqual(idsIn(file), ['b']);
    spool.read().forget(new Set(['b']));
    assert.equal(existsSync(file), false);
    spool.close();
  });

  test('a slot appended to since it was read is left whole for the next round', () => {
    const { spool, file } = open();
    spool.append(record('a'));
    const round = spool.read();
    spool.append(record('b'));
    round.forget(new Set(['a']));
    assert.deepEqual(idsIn(file), ['a', 'b']);
    spool.close();
  });

  test('a crash before the rename (a torn temporary file left behind) loses nothing and is never read', () => {
    const { dir, spool, file } = open();
    for (const id of ['a', 'b']) spool.append(record(id));
    // What a kill -9 mid-rewrite leaves: the old slot whole, a partial temporary file beside it.
    writeFileSync(`${file}.rewrite`, '{"requestId":"b","wal');
    spool.close();
    const next = SettleSpool.open(dir, 'fp');
    assert.deepEqual(
      next.read().records.map((r) => r.requestId),
      ['a', 'b'],
      'every line still there (re-applying an applied one charges nothing)',
    );
    next.append(record('c'));
    next.read().forget(new Set(['a']));
    assert.deepEqual(idsIn(file), ['b', 'c']);
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.endsWith('.rewrite')),
      [],
      'the leftover was replaced by the rewrite',
    );
    next.close();
  });

  test('writable() sees a slot that cannot be written', () => {
    const { spool, file } = open();
    assert.equal(spool.writable(), true);
    spool.append(record('a'));
    assert.equal(spool.writable(), true);
    spool.read().forget(new Set(['a']));
    assert.equal(existsSync(file), false);
    // A directory in the file's place: an append fails (EISDIR) as it would on EROFS or EACCES.
    mkdirSync(file);
    assert.equal(spool.writable(), false);
    assert.throws(() => spool.append(record('b')));
    spool.close();
  });
});
