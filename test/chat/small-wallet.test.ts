import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { CLAUDE, resetProviders, startAnthropicHarness, type AnthropicHarness } from '../support/anthropic-harness.ts';
import { MODELS } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { expectBilledExactly, GPT, GPT_BYTES, o200kPromptTokens, OUTPUT_TOKENS, overReservations, plain, PRICES } from './small-wallet-models.ts';

/**
 * Claude Code on a small wallet: its real first request (recorded from the pinned binary,
 * test/chat/fixtures/) on a wallet of 50,000 micro-USDC ($0.05), at $1 and $2 per million tokens.
 * Its 49 KB body is reserved at about 49,900 prompt tokens by bytes, about 13,500 by o200k: on a
 * model whose deployment names its tokenizer the request is served and billed exactly; on Claude
 * (no public tokenizer, bytes stay the bound) the 402 says what the request needs.
 */

const RECORDED = JSON.parse(readFileSync(new URL('./fixtures/claude-code-2.1.332-request.json', import.meta.url), 'utf8'));
const WALLET = 50_000;
const CLAUDE_SMALL = { ...CLAUDE, name: 'claude-small-wallet', ...PRICES };
/** Room for the 32,000 output tokens Claude Code asks for, with the balance fit on. */
const GPT_FIT = { ...GPT, name: 'gpt-fit', maxOutputTokens: 32_000, fitMaxTokens: true };

for (const engine of ENGINES) {
  describe(`Claude Code's request on a $0.05 wallet (${engine})`, () => {
    let h: AnthropicHarness;
    let reported: number[] = [];
    before(async () => {
      h = await startAnthropicHarness(
        engine,
        { models: [...MODELS, CLAUDE, GPT, GPT_BYTES, CLAUDE_SMALL, GPT_FIT] },
        {},
        {
          // The provider bills what its tokenizer counts in the body it got.
          openai: (body) => {
            const prompt = o200kPromptTokens(body);
            reported.push(prompt);
            return { content: 'hi', usage: { prompt_tokens: prompt, completion_tokens: OUTPUT_TOKENS } };
          },
        },
      );
    });
    beforeEach(() => {
      resetProviders(h);
      reported = [];
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const send = (key: string, model: string, headers: Record<string, string> = {}) =>
      fetch(`${h.gw.url}/v1/messages`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-api-key': key,
          'anthropic-version': '2023-06-01',
          'anthropic-beta': RECORDED.anthropicBeta,
          ...headers,
        },
        body: JSON.stringify({ ...RECORDED.body, model }),
      });

    /** The recorded request on a fresh wallet ($0.05 unless said): a 402 INSUFFICIENT_BALANCE with no provider called; its body. */
    async function refusedOnSmallWallet(model: string, funds = WALLET): Promise<any> {
      const w = await h.wallet(funds);
      const res = await send(w.key, model);
      const body = (await res.json()) as any;
      assert.equal(res.status, 402);
      assert.equal(h.fake.received.length + h.anthropic.received.length, 0);
      assert.equal(body.error.code, 'INSUFFICIENT_BALANCE');
      return body;
    }

    test('on a model whose deployment names its tokenizer (o200k): served, reserved below the balance, billed exactly what the provider reported', async () => {
      const w = await h.wallet(WALLET);
      const res = await send(w.key, 'fake/gpt-small-wallet');
      const text = await res.text();
      assert.equal(res.status, 200, text.slice(0, 500));
      assert.match(text, /message_stop/);
      assert.equal(h.fake.received.length, 1);
      const prompt = reported[0]!;
      assert.ok(prompt > 8_000, `the provider counted ${prompt} prompt tokens`);
      await expectBilledExactly(h, w, WALLET, prompt);
    });

    test('with the balance fit, max_tokens 32,000 is lowered to what the wallet covers beside the tokenizer bound, not refused at the byte bound', async () => {
      const w = await h.wallet(WALLET);
      const res = await send(w.key, 'fake/gpt-fit');
      const text = await res.text();
      assert.equal(res.status, 200, text.slice(0, 500));
      const fitted = Number(res.headers.get('x-tollgate-max-tokens-fitted'));
      assert.ok(fitted >= 4096 && fitted < 32_000, `fitted ${fitted}`);
      assert.equal(h.fake.received[0]!.body.max_tokens, fitted);
      const charge = reported[0]! + OUTPUT_TOKENS * 2;
      const balance = await h.balance(w.account);
      assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: WALLET - charge, locked: 0 });
      assert.equal(await overReservations(h), 0);
    });

    test('the same request on the same model without a named tokenizer: 402 at the byte bound, and the message names the figures', async () => {
      const body = await refusedOnSmallWallet('fake/gpt-no-tokenizer');
      assert.ok(body.error.prompt_tokens_bound > 45_000, 'bytes: about one token per byte of the 49 KB body');
      assert.equal(body.error.max_tokens, 4096);
      assert.equal(body.error.max_tokens_affordable, Math.floor((WALLET - body.error.prompt_tokens_bound) / 2));
      assert.match(body.error.message, /top up with POST \/v1\/topup/);
      const { prompt_tokens_bound: bound, max_tokens_affordable: affordable } = body.error;
      const figures = `for up to ${bound} prompt tokens and max_tokens 4096: the ${WALLET} available covers max_tokens up to ${affordable}`;
      assert.match(body.error.message, new RegExp(figures));
    });

    test('on Claude (its tokenizer is not public: the bound stays at bytes): 402 that says the prompt alone needs more than the wallet holds', async () => {
      const body = await refusedOnSmallWallet('anth/claude-small-wallet');
      assert.equal(body.error.max_tokens_affordable, 0);
      assert.ok(body.error.min_required_usdc > WALLET);
      const least = body.error.min_required_usdc;
      assert.match(body.error.message, new RegExp(`its prompt alone needs ${least} \\(at max_tokens 1\\), more than the ${WALLET} available`));
    });

    describe('attack: a prompt crafted to tokenize badly is still reserved for in full', () => {
      /** Random printable ASCII: short pieces of symbols, digits and letters, about 0.75 o200k tokens a byte (English is about 0.25). */
      const hostile = Array.from({ length: 24_000 }, (_, i) => String.fromCharCode(33 + ((i * 7919 + (i >> 3) * 104729) % 94))).join('');
      const chat = (key: string) =>
        fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
          body: JSON.stringify({ model: 'fake/gpt-small-wallet', max_tokens: 16, messages: [{ role: 'user', content: hostile }] }),
        });

      test("a wallet holding the text's own token count, less than the provider bills, is refused before the provider is called", async () => {
        const textTokens = countTokens(hostile, plain);
        assert.ok(textTokens > 0.5 * hostile.length, `${textTokens} tokens for ${hostile.length} bytes`);
        const w = await h.wallet(textTokens);
        const res = await chat(w.key);
        assert.equal(res.status, 402, await res.text());
        assert.equal(h.fake.received.length, 0);
      });

      test("an empty wallet costs no count past 16,384 tokens: a long prompt is refused at its byte bound, Claude Code's at its tokenizer's", async () => {
        const empty = await h.wallet(10);
        const long = await chat(empty.key);
        assert.equal(long.status, 402);
        assert.ok(((await long.json()) as any).prompt_tokens_bound > hostile.length, 'the count stopped: bytes');
        const typical = await refusedOnSmallWallet('fake/gpt-small-wallet', 10);
        assert.ok(typical.error.prompt_tokens_bound < 16_384, `Claude Code's request is counted in full: ${typical.error.prompt_tokens_bound}`);
        assert.equal(h.fake.received.length, 0);
      });

      test('a wallet that covers the bound is served and billed what the provider counted, never above the reservation', async () => {
        const w = await h.wallet(2 * hostile.length);
        const res = await chat(w.key);
        assert.equal(res.status, 200, await res.text());
        const charge = reported[0]! + OUTPUT_TOKENS * 2;
        assert.ok(reported[0]! > countTokens(hostile, plain));
        const balance = await h.balance(w.account);
        assert.deepEqual({ balance: balance.balance_usdc, locked: balance.locked_usdc }, { balance: 2 * hostile.length - charge, locked: 0 });
        assert.equal(await overReservations(h), 0);
      });
    });
  });
}
