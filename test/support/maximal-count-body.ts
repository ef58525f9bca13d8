import assert from 'node:assert/strict';

/**
 * Random CJK text padded to exactly `bytes` bytes, as a count_tokens body for `model`: the costliest
 * shape to tokenize, at the body limit.
 */
export function maximalCountBody(model: string, bytes: number): string {
  const chars = Array.from({ length: Math.floor((bytes - 2048) / 3) }, () => String.fromCharCode(0x4e00 + Math.floor(Math.random() * 20_000))).join('');
  const short = JSON.stringify({ model, messages: [{ role: 'user', content: chars }] });
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: chars + 'a'.repeat(bytes - Buffer.byteLength(short)) }] });
  assert.equal(Buffer.byteLength(body), bytes);
  return body;
}
