import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { MODELS, startChatHarness, type ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { expectBilledExactly, GPT, GPT_BYTES, o200kPromptTokens, OUTPUT_TOKENS } from './small-wallet-models.ts';

/**
 * The Codex CLI's real /v1/responses requests (recorded from the pinned binary, test/chat/fixtures/):
 * its first, and its second after a shell tool round trip. About 40 KB each (nine tools, 19 KB of
 * them, and a 20 KB developer prompt). On a model whose deployment names its tokenizer (o200k) each is
 * measured three ways: the byte bound, the tokenizer bound (both as the gateway's 402 names them) and
 * what the provider bills (the cookbook's rules, the real tokenizer, over the chat body it got). The
 * bill must not pass the tokenizer bound, nor that the byte bound; and a wallet that covers the
 * tokenizer bound's reservation but not the byte bound's is served and billed exactly.
 */

const RECORDED = JSON.parse(readFileSync(new URL('./fixtures/codex-0.171.0-requests.json', import.meta.url), 'utf8'));
const REQUESTS: [string, Record<string, unknown>][] = [
  ['first request', RECORDED.first],
  ['second request, after the shell tool round trip', RECORDED.afterToolCall],
];

for (const engine of ENGINES) {
  describe(`Codex CLI's requests on a small wallet, o200k (${engine})`, () => {
    let h: ChatHarness;
    let billed: number[] = [];
    before(async () => {
      h = await startChatHarness(
        engine,
        { models: [...MODELS, GPT, GPT_BYTES] },
        {
          // The provider bills what its tokenizer counts in the body it got.
          fakeBehaviourFor: (body) => {
            const prompt = o200kPromptTokens(body);
            billed.push(prompt);
            return { content: 'done', usage: { prompt_tokens: prompt, completion_tokens: OUTPUT_TOKENS } };
          },
        },
      );
    });
    beforeEach(() => {
      h.fake.received.length = 0;
      billed = [];
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const send = (key: string, recorded: Record<string, unknown>, model: string) =>
      fetch(`${h.gw.url}/v1/responses`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${key}` },
        body: JSON.stringify({ ...recorded, model }),
      });

    /** The gateway's 402 for `recorded` on `model` on a wallet of 10 micro-USDC (nothing sent upstream): its prompt bound and reservation. */
    async function refusedOnEmptyWallet(recorded: Record<string, unknown>, model: string): Promise<{ bound: number; reserved: number }> {
      const w = await h.wallet(10);
      const res = await send(w.key, recorded, model);
      const body = (await res.json()) as any;
      assert.equal(res.status, 402, JSON.stringify(body));
      assert.equal(h.fake.received.length, 0);
      assert.equal(body.error, 'INSUFFICIENT_BALANCE');
      return { bound: body.prompt_tokens_bound, reserved: body.required_usdc };
    }

    for (const [name, recorded] of REQUESTS) {
      test(`${name}: billed ≤ tokenizer bound ≤ byte bound, and a wallet only the tokenizer bound fits is served and billed exactly`, async () => {
        const bytes = await refusedOnEmptyWallet(recorded, 'fake/gpt-no-tokenizer');
        const tokenizer = await refusedOnEmptyWallet(recorded, 'fake/gpt-small-wallet');
        const [byteBound, tokenizerBound, wallet] = [bytes.bound, tokenizer.bound, tokenizer.reserved];
        assert.ok(bytes.reserved > wallet, 'the byte bound would refuse this wallet');

        const w = await h.wallet(wallet);
        const res = await send(w.key, recorded, 'fake/gpt-small-wallet');
        const text = await res.text();
        assert.equal(res.status, 200, text.slice(0, 500));
        assert.match(text, /response\.completed/);
        assert.equal(h.fake.received.length, 1);
        const prompt = billed[0]!;
        // Measured: 6,082 ≤ 6,765 ≤ 28,440 (first) and 6,167 ≤ 6,894 ≤ 28,814 (second); docs/DECISIONS.md.
        const figures = JSON.stringify({ billed: prompt, tokenizerBound, byteBound });
        assert.ok(prompt <= tokenizerBound && tokenizerBound <= byteBound, figures);

        await expectBilledExactly(h, w, wallet, prompt);
      });
    }
  });
}
