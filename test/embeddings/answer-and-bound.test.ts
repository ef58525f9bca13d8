import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildCatalog } from '../../src/providers/catalog.ts';
import { decodeEmbeddings, fromBase64, renderEmbeddings, toBase64 } from '../../src/embeddings/answer.ts';
import { PER_INPUT_TOKENS, planEmbeddings } from '../../src/embeddings/plan.ts';

const catalog = buildCatalog({
  models: [{ provider: 'p', name: 'e', type: 'embedding', contextLength: 100, promptCostPer1M: '10', maxOutputTokens: 1, reasoningFamily: 'none', created: 0 }],
  pricing: { markupPercent: '0', listedPrices: 'billed' },
});

describe('the embeddings bound: strings by their bytes, token arrays exactly, each capped at the window', () => {
  test('a string is bounded by its UTF-8 size, never its character count', () => {
    const plan = planEmbeddings({ model: 'e', input: 'é€😀' }, catalog);
    assert.equal(plan.promptUpperBound, 2 + 3 + 4 + PER_INPUT_TOKENS);
    assert.equal(plan.reservationUsdc, plan.promptUpperBound * 10);
  });

  test('token arrays count their ids; each input is capped at the context length; the sum is reserved', () => {
    assert.equal(planEmbeddings({ model: 'e', input: [[1, 2, 3], [4]] }, catalog).promptUpperBound, 3 + 1 + 2 * PER_INPUT_TOKENS);
    assert.equal(planEmbeddings({ model: 'e', input: ['x'.repeat(500), 'y'] }, catalog).promptUpperBound, 100 + 1 + PER_INPUT_TOKENS);
  });

  test('the upstream request carries only the allowlisted fields, with the model named by the deployment, and always asks for base64', () => {
    const plan = planEmbeddings({ model: 'p/e', input: 'a', dimensions: 3, user: 'u' }, catalog);
    assert.deepEqual(plan.upstreamBody, { input: 'a', encoding_format: 'base64', dimensions: 3, user: 'u' });
  });
});

describe("attack: a provider's malformed embeddings answer is refused (a 502 that charges nothing)", () => {
  const answer = (data: unknown[], usage: unknown = { prompt_tokens: 3, total_tokens: 3 }) => JSON.stringify({ object: 'list', data, model: 'e', usage });
  const vector = (index: number) => ({ object: 'embedding', index, embedding: [0.5, -0.25] });

  test('one vector per input, indexes 0…n-1, no duplicates, valid JSON and vectors', () => {
    assert.equal(decodeEmbeddings(answer([vector(0), vector(1)]), 2).ok, true);
    for (const [text, inputs] of [
      [answer([vector(0)]), 2],
      [answer([vector(0), vector(0)]), 2],
      [answer([vector(0), vector(2)]), 2],
      [answer([vector(0), vector(1), vector(2)]), 2],
      [answer([{ index: 0, embedding: ['a'] }]), 1],
      [answer([{ index: 0, embedding: [] }]), 1],
      [answer([{ index: 0, embedding: '' }]), 1],
      [answer([{ index: 0, embedding: 'AACA' }]), 1],
      [answer([{ index: 0, embedding: 'not base64!' }]), 1],
      [
        answer([
          { index: 0, embedding: '' },
          { index: 0, embedding: 'AACAPw==' },
        ]),
        2,
      ],
      [answer([vector(0)], { total_tokens: 1 }), 1],
      [JSON.stringify({ data: [vector(0)], model: 5 }), 1],
      [answer([vector(0)], { prompt_tokens: -1 }), 1],
      [answer([vector(0)], { prompt_tokens: 1.5 }), 1],
      ['{"data": [', 1],
      ['{"object":"list"}', 1],
    ] as const) {
      assert.equal(decodeEmbeddings(text, inputs).ok, false, text);
    }
  });

  test('vectors are put back in input order and converted to the format asked for, base64 as little-endian float32', async () => {
    const decoded = decodeEmbeddings(answer([vector(1), { index: 0, embedding: toBase64(Float32Array.from([1, 2])) }]), 2);
    assert.ok(decoded.ok);
    const floats = JSON.parse((await renderEmbeddings(decoded.value, 'float', 'e', 3)).toString());
    assert.deepEqual(
      floats.data.map((d: { embedding: number[] }) => d.embedding),
      [
        [1, 2],
        [0.5, -0.25],
      ],
    );
    assert.deepEqual(floats.usage, { prompt_tokens: 3, total_tokens: 3 });
    const base64 = JSON.parse((await renderEmbeddings(decoded.value, 'base64', 'e', 3)).toString());
    assert.deepEqual(Array.from(fromBase64(base64.data[1]!.embedding as string)), [0.5, -0.25]);
    assert.equal(Buffer.from(base64.data[1]!.embedding as string, 'base64').readFloatLE(0), 0.5);
  });
});
