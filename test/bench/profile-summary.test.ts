import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { moduleOf, summarise, summaryLines, type CpuProfile } from '../../bench/profile-summary.ts';

const frame = (functionName: string, url = '', lineNumber = 0) => ({ functionName, url, lineNumber });

describe('bench/profile-summary.ts', () => {
  test('frames are grouped by package, Tollgate folder, Node built-in or V8 pseudo-frame', () => {
    assert.equal(moduleOf(frame('run', 'file:///w/node_modules/libsql/index.js')), 'libsql');
    assert.equal(moduleOf(frame('x', 'file:///w/node_modules/@fastify/cors/index.js')), '@fastify/cors');
    assert.equal(moduleOf(frame('x', 'file:///w/node_modules/a/node_modules/pino/lib/x.js')), 'pino');
    assert.equal(moduleOf(frame('reserve', 'file:///w/dist/ledger/operations/reserve.js')), 'tollgate ledger/');
    assert.equal(moduleOf(frame('main', 'file:///w/dist/app.js')), 'tollgate app.js');
    assert.equal(moduleOf(frame('writev', 'node:internal/stream_base_commons')), 'node:stream_base_commons');
    assert.equal(moduleOf(frame('createHmac', 'node:crypto')), 'node:crypto');
    assert.equal(moduleOf(frame('(garbage collector)')), '(garbage collector)');
    assert.equal(moduleOf(frame('writeUtf8String')), '(native)');
  });

  test('self time goes to the frame on top of each sample; idle is counted apart from the busy time', () => {
    const profile: CpuProfile = {
      startTime: 5_000,
      nodes: [
        { id: 1, callFrame: frame('(root)') },
        { id: 2, callFrame: frame('(idle)') },
        { id: 3, callFrame: frame('run', 'file:///w/node_modules/libsql/index.js', 9) },
        { id: 4, callFrame: frame('reserve', 'file:///w/dist/ledger/operations/reserve.js', 19) },
      ],
      samples: [2, 3, 3, 4, 2],
      timeDeltas: [100, 300, 300, 200, 100],
    };
    const s = summarise(profile);
    assert.equal(s.totalMicros, 1000);
    assert.equal(s.idleMicros, 200);
    assert.deepEqual(s.byModule.slice(0, 2), [
      { name: 'libsql', micros: 600 },
      { name: '(idle)', micros: 200 },
    ]);
    assert.deepEqual(s.byFunction[0], { name: 'run node_modules/libsql/index.js:10', micros: 600 });
    const lines = summaryLines(s);
    assert.equal(lines[0], 'sampled 0.0 s of the main thread: busy 80.0%, idle (waiting on I/O and timers) 20.0%');
    // Shares are of the busy time: libsql 600 of 800 µs.
    assert.ok(lines.includes('   75.0%  libsql'), lines.join('\n'));
    assert.ok(lines.includes('   25.0%  tollgate ledger/'), lines.join('\n'));
    assert.ok(!lines.some((l) => l.endsWith('(idle)')));
    // A window keeps only the samples taken inside it: they are at 5,100 (idle), 5,400 and 5,700
    // (libsql), 5,900 (reserve) and 6,000 (idle) on the monotonic clock.
    const loadOnly = summarise(profile, { fromMicros: 5_300, toMicros: 5_900 });
    assert.equal(loadOnly.totalMicros, 800);
    assert.deepEqual(loadOnly.byModule, [
      { name: 'libsql', micros: 600 },
      { name: 'tollgate ledger/', micros: 200 },
    ]);
  });
});
