import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { boundedTokenCount, MAX_TOKENIZED_CHARS } from '../../src/chat/token-bound/count-bounded.ts';
import { TOKENIZER_FAMILIES } from '../../src/chat/token-bound/families.ts';

/**
 * SECURITY.md: no request body may hold the event loop for more than about 50 ms. Counting tokens
 * costs CPU that grows with what the text holds (CJK words and random symbols are the slowest), so
 * the count yields as it goes: over the largest text it counts, of each slow kind, the loop's
 * longest stall stays far below a request's patience. The bound asserted is generous (the machine
 * is shared); the figures measured are in docs/DECISIONS.md.
 */

/** A deterministic pseudo-random code point in [lo, hi). */
const pick = (i: number, lo: number, hi: number) => String.fromCodePoint(lo + ((i * 2654435761) >>> 0) % (hi - lo));
const words = (count: number, length: number, lo: number, hi: number) =>
  Array.from({ length: count }, (_, w) => Array.from({ length }, (_, c) => pick(w * length + c, lo, hi)).join('')).join(' ');

const WORST: Record<string, string> = {
  'CJK words of 9 characters': words(Math.floor(MAX_TOKENIZED_CHARS / 10), 9, 0x4e00, 0x9fff),
  'random printable ASCII': Array.from({ length: MAX_TOKENIZED_CHARS }, (_, i) => pick(i, 33, 127)).join(''),
  'random letters in 120-letter words': words(Math.floor(MAX_TOKENIZED_CHARS / 121), 120, 97, 123),
};
/** The longest gap between the runs of a 1 ms timer: how long the loop was held at most. */
function stallProbe(): { stop(): Promise<number> } {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 1);
  return {
    async stop() {
      // One more run of the timer, so a stall that lasted until the end is measured too.
      await new Promise((resolve) => setTimeout(resolve, 5));
      clearInterval(timer);
      return Math.max(longest, performance.now() - last);
    },
  };
}

const STALL_LIMIT_MS = 250;

describe('the token count never holds the event loop', () => {
  for (const family of TOKENIZER_FAMILIES) {
    for (const [kind, text] of Object.entries(WORST)) {
      test(`${family}: ${kind}, ${text.length} characters: the loop never stalls ${STALL_LIMIT_MS} ms`, async (t) => {
        await boundedTokenCount('load the tokenizer first', family);
        const probe = stallProbe();
        const started = performance.now();
        const count = await boundedTokenCount(text, family);
        const ms = performance.now() - started;
        const stall = await probe.stop();
        t.diagnostic(`counted ${count} tokens in ${ms.toFixed(0)} ms; the longest stall was ${stall.toFixed(1)} ms`);
        assert.ok(count !== null && count > 0 && count <= Buffer.byteLength(text));
        assert.ok(stall < STALL_LIMIT_MS, `the loop stalled ${stall.toFixed(1)} ms (the whole count took ${ms.toFixed(0)} ms)`);
      });
    }
  }

  test('a text longer than MAX_TOKENIZED_CHARS is not counted: its bound stays at bytes', async () => {
    assert.equal(await boundedTokenCount('x'.repeat(MAX_TOKENIZED_CHARS + 1), 'o200k'), null);
  });
});
