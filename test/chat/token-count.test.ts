import assert from 'node:assert/strict';
import { test } from 'node:test';
import { boundedPieces, countTokens, MAX_TOKENIZED_RUN } from '../../src/metered/usage-estimate.ts';

const MIB = 1024 * 1024;

async function timed(text: string): Promise<{ tokens: number; ms: number }> {
  const t = performance.now();
  const tokens = await countTokens(text);
  return { tokens, ms: performance.now() - t };
}

test('boundedPieces cuts only runs longer than the bound, keeps every character, and never splits a surrogate pair', () => {
  const prose = 'The quick brown fox jumps over the lazy dog.\n\tindented  line\n';
  assert.deepEqual(boundedPieces(prose), [prose]);
  const word = 'a'.repeat(MAX_TOKENIZED_RUN * 3 + 7);
  const pieces = boundedPieces(`x ${word} y`);
  assert.equal(pieces.join(''), `x ${word} y`);
  assert.ok(pieces.length >= 4);
  for (const p of pieces) assert.ok(!/\S{201,}|\s{201,}/.test(p), 'no run over the bound is left in one piece');
  const emoji = '😀'.repeat(MAX_TOKENIZED_RUN);
  for (const p of boundedPieces(emoji)) assert.ok(!/^[\udc00-\udfff]/.test(p) && !/[\ud800-\udbff]$/.test(p), 'a surrogate pair stays whole');
  assert.equal(boundedPieces(' '.repeat(1000)).join(''), ' '.repeat(1000));
});

test('ordinary text counts as the tokenizer counts it: nothing is cut', async () => {
  const { countTokens: raw } = await import('gpt-tokenizer');
  const text = 'Tollgate reserves the worst case before the provider call and settles after it.\n'.repeat(50);
  assert.equal(await countTokens(text), raw(text));
});

test('1 MiB of one unbroken word, or of one run of whitespace, counts in time linear in its length (o200k BPE alone is quadratic)', async () => {
  await countTokens('warm up'); // loads the tokenizer
  const normal = await timed('The quick brown fox jumps over the lazy dog; 42 times, said she.\n'.repeat(Math.ceil(MIB / 64)).slice(0, MIB));
  // Unbounded, 96 KiB of "a" took 11 s: 1 MiB would take well over twenty minutes. Bounded, each of
  // these costs about what the same length of prose does (a few times at most); twenty times is generous for a busy machine.
  const limit = 20 * normal.ms;
  for (const [name, text] of [
    ['a word', 'a'.repeat(MIB)],
    ['whitespace', ' \t'.repeat(MIB / 2)],
    ['CJK', '中'.repeat(MIB / 2)],
    ['punctuation', '!'.repeat(MIB)],
  ] as const) {
    const run = await timed(text);
    assert.ok(run.ms < limit, `${name}: ${Math.round(run.ms)} ms against ${Math.round(normal.ms)} ms for 1 MiB of prose`);
    assert.ok(run.tokens > 0);
  }
});
