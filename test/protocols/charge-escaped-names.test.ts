import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';

/**
 * The charge in the final usage must be the ledger's, and "a lying provider must not be
 * able to state a charge" (src/protocols/charge.ts). The guards look for the names as text
 * (`"cost`, `"charge`): a provider that writes its keys with JSON escapes (`"\u0063harged_usdc"`,
 * the same key once parsed) passes the text check, the charge is spliced in FIRST, and the
 * provider's duplicate key, later in the object, is the one every JSON parser keeps.
 */
const FUNDS = 50_000_000;
const FAKE_CHARGE = '"\\u0063harged_usdc":1,"\\u0063ost":0.000001,';

describe('attack: a provider states its own charge with escaped key names (sqlite)', () => {
  let h: AnthropicHarness;
  before(async () => {
    h = await startAnthropicHarness('sqlite', { models: [...MODELS, CLAUDE] });
  });
  beforeEach(() => resetProviders(h));
  afterEach(() => h.gw.assertLedger());
  after(() => h.stop());

  async function send(path: string, body: Record<string, unknown>) {
    const w = await h.wallet(FUNDS);
    const res = await fetch(`${h.gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${w.key}` },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const taken = FUNDS - (await h.balance(w.account)).balance_usdc;
    return { text, taken, header: Number(res.headers.get('x-tollgate-charged-usdc')) };
  }

  test('chat completions JSON: the usage the client parses says charged_usdc 1 while the ledger took more', async () => {
    h.fake.behaviour = { rewriteAnswer: (json) => json.replace('"usage":{', `"usage":{${FAKE_CHARGE}`) };
    const { text, taken, header } = await send('/v1/chat/completions', {
      model: 'fake/chat-small',
      max_tokens: 50,
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.ok(taken > 1);
    assert.equal(header, taken);
    const usage = JSON.parse(text).usage;
    assert.equal(
      usage.charged_usdc,
      taken,
      `the answer's usage claims charged_usdc ${usage.charged_usdc}, the ledger took ${taken}; raw usage: ${text.slice(text.indexOf('"usage"'))}`,
    );
    assert.equal(usage.cost, taken / 1e6);
  });

  test('native Messages JSON (Anthropic provider): the same splice, the same lie', async () => {
    h.anthropic.behaviour = { rewriteAnswer: (json) => json.replace('"usage":{', `"usage":{${FAKE_CHARGE}`) };
    const { text, taken } = await send('/v1/messages', { model: 'anth/claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    const usage = JSON.parse(text).usage;
    assert.equal(usage.charged_usdc, taken, `message usage claims charged_usdc ${usage.charged_usdc}, the ledger took ${taken}`);
  });

  test('chat stream: a content chunk carrying usage states a charge of the provider\'s ("content chunks that carry usage cannot state a charge either")', async () => {
    h.fake.behaviour = {
      // The content chunks carry a usage object (some providers send running usage), its charge keys escaped.
      rewriteChunk: (json) =>
        json.includes('"delta":{"content"')
          ? json.replace('"usage":null', '"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"\\u0063harged_usdc":1}')
          : json,
    };
    const { text, taken } = await send('/v1/chat/completions', {
      model: 'fake/chat-small',
      max_tokens: 50,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'hi' }],
    });
    const stated = text
      .split('\n\n')
      .map((b) => b.replace(/^data: /, ''))
      .filter((d) => d.startsWith('{'))
      .map((d) => JSON.parse(d))
      .filter((c) => c.usage && 'charged_usdc' in c.usage)
      .map((c) => c.usage.charged_usdc);
    assert.deepEqual(stated, [taken], `charges stated in the stream: ${stated.join(', ')}; the ledger took ${taken}`);
  });

  test("native Messages stream: message_start (where LangChain reads usage) carries the provider's charge", async () => {
    h.anthropic.behaviour = {
      rewriteAnswer: (json) => (json.includes('"type":"message_start"') ? json.replace('"usage":{', `"usage":{${FAKE_CHARGE}`) : json),
    };
    const { text, taken } = await send('/v1/messages', {
      model: 'anth/claude-test',
      max_tokens: 50,
      stream: true,
      messages: [{ role: 'user', content: 'hi' }],
    });
    const stated = text
      .split('\n\n')
      .map((b) =>
        b
          .split('\n')
          .find((l) => l.startsWith('data: '))
          ?.slice(6),
      )
      .filter((d): d is string => !!d)
      .map((d) => JSON.parse(d))
      .map((e) => e.usage ?? e.message?.usage)
      .filter((u) => u && 'charged_usdc' in u)
      .map((u) => u.charged_usdc);
    assert.deepEqual(stated, [taken], `charges stated in the stream: ${stated.join(', ')}; the ledger took ${taken}`);
  });
});
