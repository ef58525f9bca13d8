import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';

const FUNDS = 1_000_000;
const OPENAI_USAGE = { prompt_tokens: 100, completion_tokens: 50 };
const CHARGE = 240; // 100 × 1.2 + 50 × 2.4
const REFUSAL = "I'm sorry, I can't help with that.";

/** The fake's answer as OpenAI writes a refusal: `content` null, the model's words in `message.refusal`. */
const refusingAnswer = (json: string) => {
  const a = JSON.parse(json);
  a.choices[0].message = { ...a.choices[0].message, content: null, refusal: REFUSAL };
  return JSON.stringify(a);
};
/** The same streamed: each content delta becomes a refusal delta. */
const refusingChunk = (json: string) => {
  const c = JSON.parse(json);
  for (const choice of c.choices ?? []) {
    if (typeof choice.delta?.content === 'string' && choice.delta.content) choice.delta = { refusal: choice.delta.content };
  }
  return JSON.stringify(c);
};

/**
 * An OpenAI-compatible model that refuses writes its words in `refusal`, not `content`. Translated
 * for a Messages client, the refusal was dropped: the client got an empty message and was billed
 * for the refusal's tokens (every other protocol shows them: chat as sent, Responses as a refusal part).
 */
describe('an OpenAI refusal, answered to a Messages client', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite');
  });
  beforeEach(() => resetProviders(h, {}, { usage: OPENAI_USAGE }));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  test('messages.create: the refusal is the answer text; billed', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: OPENAI_USAGE, content: REFUSAL, rewriteAnswer: refusingAnswer };
    const client = new Anthropic({ baseURL: h.gw.url, apiKey: w.key, maxRetries: 0 });
    const message = await client.messages.create({ model: 'fake/chat-small', max_tokens: 300, messages: [{ role: 'user', content: 'hi' }] });
    assert.deepEqual(message.content, [{ type: 'text', text: REFUSAL }]);
    const b = await h.balance(w.account);
    assert.deepEqual({ balance: b.balance_usdc, locked: b.locked_usdc }, { balance: FUNDS - CHARGE, locked: 0 });
  });

  test('messages.stream: the refusal streams as text; billed', async () => {
    const w = await h.wallet(FUNDS);
    h.fake.behaviour = { usage: OPENAI_USAGE, content: REFUSAL, rewriteChunk: refusingChunk };
    const client = new Anthropic({ baseURL: h.gw.url, apiKey: w.key, maxRetries: 0 });
    const message = await client.messages.stream({ model: 'fake/chat-small', max_tokens: 300, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
    assert.deepEqual(message.content, [{ type: 'text', text: REFUSAL }]);
    const b = await h.balance(w.account);
    assert.deepEqual({ balance: b.balance_usdc, locked: b.locked_usdc }, { balance: FUNDS - CHARGE, locked: 0 });
  });
});
