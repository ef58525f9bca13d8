import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { boundedTokenCount, MAX_TOKENIZED_CHARS } from '../../src/metered/token-bound/count-bounded.ts';
import { TOKENIZER_FAMILIES } from '../../src/metered/token-bound/families.ts';
import { watchTurns } from '../support/loop-hold.ts';

/**
 * SECURITY.md: no request body may hold the event loop for more than about 50 ms. Counting tokens
 * costs CPU that grows with what the text holds (CJK words and random symbols are the slowest), so
 * the count yields as it goes: over the largest text it counts, of each slow kind, the loop's
 * longest turn stays far below a request's patience. A turn is measured in CPU time (as
 * test/support/loop-hold.ts explains, wall time on the shared test machine is the scheduler's);
 * the bound asserted is generous; the figures measured are in docs/DECISIONS.md.
 */

/** A deterministic pseudo-random code point in [lo, hi). */
const pick = (i: number, lo: number, hi: number) => String.fromCodePoint(lo + (((i * 2654435761) >>> 0) % (hi - lo)));
const words = (count: number, length: number, lo: number, hi: number) =>
  Array.from({ length: count }, (_, w) => Array.from({ length }, (_, c) => pick(w * length + c, lo, hi)).join('')).join(' ');

const WORST: Record<string, string> = {
  'CJK words of 9 characters': words(Math.floor(MAX_TOKENIZED_CHARS / 10), 9, 0x4e00, 0x9fff),
  'random printable ASCII': Array.from({ length: MAX_TOKENIZED_CHARS }, (_, i) => pick(i, 33, 127)).join(''),
  'random letters in 120-letter words': words(Math.floor(MAX_TOKENIZED_CHARS / 121), 120, 97, 123),
};
const STALL_LIMIT_MS = 250;

describe('the token count never holds the event loop', () => {
  for (const family of TOKENIZER_FAMILIES) {
    for (const [kind, text] of Object.entries(WORST)) {
      test(`${family}: ${kind}, ${text.length} characters: no turn of the loop takes ${STALL_LIMIT_MS} ms of CPU`, async (t) => {
        await boundedTokenCount('load the tokenizer first', family);
        const turns = watchTurns();
        const started = performance.now();
        const count = await boundedTokenCount(text, family);
        const ms = performance.now() - started;
        const stall = turns.stop();
        t.diagnostic(`counted ${count} tokens in ${ms.toFixed(0)} ms; the longest turn took ${stall.toFixed(1)} ms of CPU`);
        assert.ok(count !== null && count > 0 && count <= Buffer.byteLength(text));
        assert.ok(stall < STALL_LIMIT_MS, `one turn of the loop took ${stall.toFixed(1)} ms of CPU (the whole count took ${ms.toFixed(0)} ms)`);
      });
    }
  }

  test('a text longer than MAX_TOKENIZED_CHARS is not counted: its bound stays at bytes', async () => {
    assert.equal(await boundedTokenCount('x'.repeat(MAX_TOKENIZED_CHARS + 1), 'o200k'), null);
  });
});
