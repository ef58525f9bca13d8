import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { answerByteBound } from '../../src/metered/answer-bound.ts';

/** The size a whole answer may have grows with what the request may produce: choices, tokens, logprobs. */
describe('the byte bound of a whole chat answer', () => {
  const plan = (maxTokens: number, n = 1, upstreamBody: Record<string, unknown> = {}) => ({ maxTokens, n, upstreamBody });

  test('a frame of 1 MiB plus 64 bytes a token, for each choice', () => {
    assert.equal(answerByteBound(plan(1000)), 1024 * 1024 + 64_000);
    assert.equal(answerByteBound(plan(1000, 3)), 1024 * 1024 + 3 * 64_000);
  });

  test('logprobs add an entry a token, and one more per alternative asked for', () => {
    assert.equal(answerByteBound(plan(1000, 1, { logprobs: true })), 1024 * 1024 + 1000 * (64 + 256));
    assert.equal(answerByteBound(plan(1000, 1, { logprobs: true, top_logprobs: 20 })), 1024 * 1024 + 1000 * (64 + 256 * 21));
    assert.equal(answerByteBound(plan(1000, 1, { logprobs: false })), 1024 * 1024 + 64_000);
  });

  test('a whole 128k-token answer of escaped CJK text fits (18 bytes a token at most)', () => {
    const answer = JSON.stringify({ choices: [{ message: { content: '\\u4e2d\\u6587\\u5b57'.repeat(128_000) } }] });
    assert.ok(answer.length < answerByteBound(plan(128_000)));
  });
});
