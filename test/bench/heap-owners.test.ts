import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { heapOwnerLines, heapOwners } from '../../bench/heap-owners.ts';

/**
 * A process writes a snapshot, then makes 200 holders, each keeping an array of 50 strings of its
 * own, and a shared table that all holders point at, kept in an array made before the first, then writes a second snapshot. Every new byte of a
 * holder's strings must be charged to the holder, the shared table (reached from all of them) to no
 * holder, and nothing to the objects that merely existed before.
 */
test('heap owners: the new memory is charged to the object whose removal would free it', () => {
  const dir = mkdtempSync(join(tmpdir(), 'heap-owners-'));
  try {
    const script = `
      const { writeHeapSnapshot } = require('node:v8');
      class Holder { constructor(i, shared) { this.shared = shared; this.words = Array.from({ length: 50 }, (_, j) => JSON.parse(JSON.stringify('w'.repeat(100) + i + ':' + j))); } }
      globalThis.held = []; // old, as a server's set of connections is: what holds the holders is not charged
      writeHeapSnapshot(${JSON.stringify(join(dir, 'before.heapsnapshot'))});
      const shared = { table: Array.from({ length: 1000 }, (_, j) => 'shared-' + j) };
      for (let i = 0; i < 200; i++) globalThis.held.push(new Holder(i, shared));
      writeHeapSnapshot(${JSON.stringify(join(dir, 'after.heapsnapshot'))});`;
    execFileSync(process.execPath, ['-e', script]);
    const read = (name: string) => JSON.parse(readFileSync(join(dir, name), 'utf8'));
    const result = heapOwners(read('before.heapsnapshot'), read('after.heapsnapshot'), 200);
    const holder = result.rows.find((r) => r.owner === 'object: Holder');
    assert.ok(holder, heapOwnerLines(result, 10).join('\n'));
    assert.equal(holder.count, 1, 'one holder per thing held');
    // 50 flat strings (JSON.parse makes them flat, not cons strings) of 103-106 one-byte characters, about 120 bytes
    // each with their header, their array and the holder.
    assert.ok(holder.bytes > 50 * 112 && holder.bytes < 50 * 160, `a holder retains its own strings only: ${holder.bytes} B`);
    assert.ok(!result.rows.some((r) => r.owner === 'object: Holder' && r.bytes > 50 * 160), 'the shared table is not charged to a holder');
    const shared = result.rows.find((r) => r.owner.startsWith('object: {table'));
    assert.ok(shared && shared.bytes * 200 > 1000 * 20, 'the shared table is charged once, to itself');
    assert.match(heapOwnerLines(result, 5, ['Holder']).join('\n'), /one new Holder, \d+ B retained:\n.*object: Array/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
