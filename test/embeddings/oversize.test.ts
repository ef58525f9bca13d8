import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import { promptTokensAtEnd, readAnswer } from '../../src/embeddings/oversize.ts';

/** A provider's body in chunks of `size` bytes, as undici hands it over. */
const body = (text: string, size: number) => {
  const bytes = Buffer.from(text);
  const chunks = Array.from({ length: Math.ceil(bytes.length / size) }, (_, i) => bytes.subarray(i * size, (i + 1) * size));
  return Readable.from(chunks) as unknown as Parameters<typeof readAnswer>[0];
};
const answer = (padding: number) =>
  `{"object":"list","data":[{"index":0,"embedding":"${'A'.repeat(padding)}"}],"model":"m","usage":{"prompt_tokens":42,"total_tokens":42}}`;

describe('reading an embeddings answer past the read cap', () => {
  test('an answer within the cap is its text', async () => {
    assert.deepEqual(await readAnswer(body(answer(100), 7), true, 1000, 4000), { text: answer(100) });
  });

  test('a 2xx past the cap is drained for the usage at its end, whatever the chunking', async () => {
    for (const size of [1, 13, 4096, 100_000]) {
      const read = await readAnswer(body(answer(20_000), size), true, 1000, 100_000);
      assert.deepEqual(read, { oversize: { bytes: answer(20_000).length, promptTokens: 42 } }, `chunks of ${size}`);
    }
  });

  test('past the drain limit, or for an error answer, reading stops with no usage', async () => {
    const drained = await readAnswer(body(answer(20_000), 1000), true, 1000, 5000);
    assert.ok('oversize' in drained && drained.oversize.promptTokens === null && drained.oversize.bytes <= 6000);
    const error = await readAnswer(body(answer(20_000), 1000), false, 1000, 100_000);
    assert.ok('oversize' in error && error.oversize.promptTokens === null && error.oversize.bytes <= 2000);
  });

  test('the usage is read only from a usage object', () => {
    assert.equal(promptTokensAtEnd('…"model":"m","usage":{"prompt_tokens":7,"total_tokens":7}}'), 7);
    assert.equal(promptTokensAtEnd('…"usage": { "total_tokens": 9, "prompt_tokens": 9 } }'), 9);
    assert.equal(promptTokensAtEnd('…"model":"m"}'), null);
    assert.equal(promptTokensAtEnd('…"usage":{"prompt_tokens":"7"}}'), null);
  });
});
