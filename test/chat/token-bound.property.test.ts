import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { countTokens as o200k } from 'gpt-tokenizer/encoding/o200k_base';
import { countTokens as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { planChat } from '../../src/metered/plan/plan.ts';
import { tightenPromptBound } from '../../src/metered/token-bound/tighten.ts';
import { parseConfig } from '../../src/config/load.ts';
import { buildCatalog } from '../../src/providers/catalog.ts';

/**
 * The tokenizer bound is a true bound: for each OpenAI family, over adversarial text, it is at least
 * what OpenAI bills for the prompt as its own counting rules render it (the OpenAI cookbook's rules
 * for chat messages and for function definitions, with the real tokenizer), and never above the byte
 * bound it replaces.
 */

const FAMILIES = { o200k, cl100k } as const;
const LIMITS_AND_PRICES = { contextLength: 50_000_000, maxOutputTokens: 1000, promptCostPer1M: '1', completionCostPer1M: '2' };
const config = parseConfig(
  {
    providers: {
      oa: { type: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: 'OA_KEY' },
      other: { type: 'openai-compatible', baseUrl: 'http://127.0.0.1:9/v1', apiKeyEnv: 'OTHER_KEY' },
    },
    models: [
      ...(['o200k', 'cl100k'] as const).map((tokenizer) => ({ provider: 'oa', name: tokenizer, tokenizer, ...LIMITS_AND_PRICES })),
      // A fallback that names no tokenizer: bounded by bytes, whatever the first deployment's tokenizer says.
      { provider: 'oa', name: 'mixed', tokenizer: 'o200k', ...LIMITS_AND_PRICES, fallbacks: [{ provider: 'other' }] },
    ],
  },
  {},
);
const catalog = buildCatalog(config);

const plain = { disallowedSpecial: new Set<string>() };

/**
 * OpenAI's prompt tokens for a chat body by the cookbook's rules: 3 per message, the tokens of each
 * message's values (role, content, name) plus 1 per name, 3 to prime the reply; per function 7 and
 * 12 around `name:description`, 3 for its parameters, per property 3 and `key:type:description`,
 * per enum -3 and 3 plus the tokens of each value.
 */
function openAiPromptTokens(body: any, count: (t: string) => number): number {
  let total = 3;
  for (const m of body.messages) {
    total += 3 + count(m.role) + count(m.content);
    if (m.name) total += 1 + count(m.name);
  }
  for (const t of body.tools ?? []) {
    const f = t.function;
    total += 7 + count(`${f.name}:${String(f.description ?? '').replace(/\.$/, '')}`) + 12;
    const props = Object.entries<any>(f.parameters?.properties ?? {});
    if (props.length) total += 3;
    for (const [key, p] of props) {
      total += 3 + count(`${key}:${p.type}:${String(p.description ?? '').replace(/\.$/, '')}`);
      if (Array.isArray(p.enum)) {
        total -= 3;
        for (const item of p.enum) total += 3 + count(String(item));
      }
    }
  }
  return total;
}

/** Text that tokenizes badly or escapes heavily: random code points, CJK, emoji, punctuation, base64, digits, escapes, special-token look-alikes. */
const adversarial = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 300 }),
  fc.string({ unit: 'grapheme', maxLength: 200 }),
  fc.string({ unit: fc.integer({ min: 0x4e00, max: 0x9fff }).map((c) => String.fromCodePoint(c)), maxLength: 300 }),
  fc.string({ unit: fc.integer({ min: 0x1f300, max: 0x1faff }).map((c) => String.fromCodePoint(c)), maxLength: 200 }),
  fc.string({ unit: fc.constantFrom(...'!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'.split('')), maxLength: 400 }),
  fc.uint8Array({ maxLength: 600 }).map((b) => Buffer.from(b).toString('base64')),
  fc.string({ unit: fc.constantFrom(...'0123456789'.split('')), maxLength: 600 }),
  fc.string({ unit: fc.constantFrom('\n', '\\', '"', '\t', ' ', '\u0000', '\u001f', 'a', 'n', '\r', '\ud800', '/'), maxLength: 400 }),
  fc
    .array(fc.constantFrom('<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|im_sep|>', '<|fim_prefix|>', ' word', '\n\n'), { maxLength: 40 })
    .map((a) => a.join('')),
);
const text = fc.array(adversarial, { minLength: 1, maxLength: 3 }).map((parts) => parts.join(''));
const name = fc.option(fc.stringMatching(/^[a-zA-Z0-9_-]{1,20}$/), { nil: undefined });
const message = fc.record({ role: fc.constantFrom('system', 'user', 'assistant'), content: text, name }).map(({ name, ...m }) => (name ? { ...m, name } : m));
const property = fc.record({
  type: fc.constantFrom('string', 'number', 'boolean'),
  description: text,
  enum: fc.option(fc.array(adversarial, { minLength: 1, maxLength: 4 }), { nil: undefined }),
});
const tool = fc
  .record({
    name: fc.stringMatching(/^[a-zA-Z0-9_-]{1,30}$/),
    description: text,
    properties: fc.dictionary(fc.stringMatching(/^[a-zA-Z_]{1,12}$/), property, { maxKeys: 4 }),
  })
  .map((t) => {
    const properties = Object.fromEntries(Object.entries(t.properties).map(([k, p]) => [k, p.enum ? p : { type: p.type, description: p.description }]));
    return { type: 'function', function: { name: t.name, description: t.description, parameters: { type: 'object', properties } } };
  });
const body = fc.record({
  messages: fc.array(message, { minLength: 1, maxLength: 5 }),
  tools: fc.option(fc.array(tool, { minLength: 1, maxLength: 3 }), { nil: undefined }),
});

describe('the tokenizer prompt bound (property tests)', () => {
  for (const [family, count] of Object.entries(FAMILIES)) {
    test(`${family}: the bound is at least OpenAI's count of the rendered prompt, and at most the byte bound`, async () => {
      const counter = (t: string) => count(t, plain);
      await fc.assert(
        fc.asyncProperty(body, async (b) => {
          const request = { model: `oa/${family}`, max_tokens: 10, ...b, ...(b.tools ? {} : { tools: undefined }) };
          const plan = planChat(JSON.parse(JSON.stringify(request)), catalog, config);
          const tight = await tightenPromptBound(plan);
          const billed = openAiPromptTokens(b, counter);
          assert.ok(tight.promptUpperBound >= billed, `bound ${tight.promptUpperBound} < OpenAI's count ${billed}`);
          assert.ok(tight.promptUpperBound <= plan.promptUpperBound);
        }),
        { numRuns: 300 },
      );
    });
  }

  test('a model whose fallback names no tokenizer keeps the byte bound: the reservation holds whichever deployment serves', async () => {
    const plan = planChat({ model: 'oa/mixed', max_tokens: 10, messages: [{ role: 'user', content: 'hello world '.repeat(500) }] }, catalog, config);
    assert.equal(plan.routes.length, 2);
    const tight = await tightenPromptBound(plan);
    assert.equal(tight, plan, 'nothing lower to reserve: the same plan, at the byte bound');
    const messages = [{ role: 'user', content: 'hello world '.repeat(500) }];
    const alone = await tightenPromptBound(planChat({ model: 'oa/o200k', max_tokens: 10, messages }, catalog, config));
    assert.ok(alone.promptUpperBound < plan.promptUpperBound / 3, 'without the fallback, the o200k count is the bound');
  });
});
