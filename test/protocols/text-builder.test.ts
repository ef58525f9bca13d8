import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { TextBuilder } from '../../src/protocols/text-builder.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** What a stream's deltas look like: short strings, each a fresh one (as JSON.parse makes them). */
const delta = (i: number) => JSON.parse(`" word${i % 10}"`) as string;

describe('TextBuilder', () => {
  test('gives back exactly the pieces appended, in order, across joins', () => {
    for (const count of [0, 1, 63, 64, 65, 1000]) {
      const b = new TextBuilder();
      let expected = '';
      for (let i = 0; i < count; i++) {
        b.append(delta(i));
        b.append('');
        expected += delta(i);
        if (i === 10) assert.equal(b.toString(), expected, 'read mid-way');
      }
      assert.equal(b.toString(), expected, `${count} pieces`);
    }
  });

  test("holds a long stream's text in about its own size, where += held five times it", () => {
    const streams = 200;
    const perStream = (make: () => unknown) => {
      gc();
      const before = process.memoryUsage().heapUsed;
      const held = Array.from({ length: streams }, make);
      gc();
      const bytes = (process.memoryUsage().heapUsed - before) / streams;
      assert.equal(held.length, streams);
      return bytes;
    };
    const rope = perStream(() => {
      let t = '';
      for (let i = 0; i < 2000; i++) t += delta(i);
      return t;
    });
    const built = perStream(() => {
      const b = new TextBuilder();
      for (let i = 0; i < 2000; i++) b.append(delta(i));
      return b;
    });
    // 12,000 characters of text: one byte each in a flat string.
    assert.ok(built < 20_000, `a builder of 2,000 deltas holds ${built.toFixed(0)} B`);
    assert.ok(rope > 3 * built, `+= held ${rope.toFixed(0)} B against the builder's ${built.toFixed(0)} B`);
  });
});
