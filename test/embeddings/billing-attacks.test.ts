import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import type { Metrics } from '../../src/metrics/metrics.ts';
import { PER_INPUT_TOKENS } from '../../src/embeddings/plan.ts';
import { countTokens } from '../../src/metered/usage-estimate.ts';
import type { ChatHarness } from '../support/chat-harness.ts';
import { ENGINES } from '../support/engines.ts';
import { call } from '../support/gateway.ts';
import { assertBilledOnce, EMBED_ID, fakeTokensOf, MICRO_PER_TOKEN, startEmbeddingsHarness } from '../support/embeddings-harness.ts';
import { siweProof } from '../support/siwe.ts';
import { expectNothingCharged, usageRowsOf } from '../support/usage-rows.ts';

const TEXT = 'hello world';
/** 11 bytes + the per-input allowance, at 12 micro-USDC a token. */
const RESERVATION = (Buffer.byteLength(TEXT) + PER_INPUT_TOKENS) * MICRO_PER_TOKEN;
const CHARGE = fakeTokensOf([TEXT]) * MICRO_PER_TOKEN;

const total = async (counter: Metrics['chargedUsdc']) => (await counter.get()).values.reduce((sum, v) => sum + v.value, 0);

for (const engine of ENGINES) {
  describe(`embeddings billing: failures, limits, lying providers, races (${engine})`, () => {
    let h: ChatHarness;
    before(async () => {
      // A short first-byte timeout, so a hung provider fails within the test.
      h = await startEmbeddingsHarness(engine, { chat: { firstByteTimeoutSeconds: 2 } });
    });
    beforeEach(() => {
      h.fake.behaviour = {};
    });
    afterEach(() => h.gw.assertLedger());
    after(() => h.stop());

    const embed = (key: string, body: Record<string, unknown> = {}) =>
      call(h.gw.url, 'POST', '/v1/embeddings', { model: EMBED_ID, input: TEXT, ...body }, { authorization: `Bearer ${key}` });

    test('the reservation is the bound and the charge the reported tokens; a 402 says how to reserve less', async () => {
      const poor = await h.wallet(RESERVATION - 1);
      const refused = await embed(poor.key);
      assert.equal(refused.status, 402);
      assert.equal(refused.body.required_usdc, RESERVATION);
      assert.match(refused.body.message, /top up with POST \/v1\/topup, or send fewer or shorter inputs$/);
      assert.equal((await usageRowsOf(h, poor.keyId)).length, 0);

      const exact = await h.wallet(RESERVATION);
      const ok = await embed(exact.key);
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.headers.get('x-tollgate-usage-estimated'), 'false');
      await assertBilledOnce(h, exact, RESERVATION, fakeTokensOf([TEXT]));
    });

    for (const [what, behaviour, status] of [
      ['a 500', { failStatus: 500 }, 502],
      ['a 429 with Retry-After', { failStatus: 429 }, 502],
      ['a dropped connection', { dropConnection: true }, 502],
      ['its own 400 (a refused input)', { failStatus: 400 }, 502],
      ['no answer before the first-byte timeout', { hang: true }, 502],
    ] as const) {
      test(`a provider failure (${what}) charges nothing and says so`, async () => {
        h.fake.behaviour = { ...behaviour };
        const w = await h.wallet(1_000_000);
        const res = await embed(w.key);
        assert.equal(res.status, status, res.text);
        assert.match(res.body.message, /nothing was charged$/);
        await expectNothingCharged(h, w, 1_000_000);
      });
    }

    test('a provider reporting no usage is billed the tokenizer estimate, said in x-tollgate-usage-estimated', async () => {
      h.fake.behaviour = { omitUsage: true };
      const w = await h.wallet(1_000_000);
      const input = ['estimate me, please', 'and me'];
      const res = await embed(w.key, { input });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers.get('x-tollgate-usage-estimated'), 'true');
      const tokens = (await countTokens(input[0]!)) + (await countTokens(input[1]!));
      assert.equal(res.body.usage.prompt_tokens, tokens);
      assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), tokens * MICRO_PER_TOKEN);
    });

    test('a key with a spend limit: refused above it with the way to reserve less, billed within it', async () => {
      const w = await h.wallet(1_000_000);
      const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, {
        ...(await siweProof(w.account)),
        spend_limit_usdc: RESERVATION + CHARGE - 1,
      });
      assert.equal(patched.status, 200, patched.text);
      assert.equal((await embed(w.key)).status, 200);
      // Spent CHARGE; what is left of the limit is one micro-USDC short of another reservation.
      const over = await embed(w.key);
      assert.equal(over.status, 402);
      assert.equal(over.body.error, 'KEY_LIMIT_EXCEEDED');
      assert.match(over.body.message, /this request reserves \d+; a total limit does not reset\. Send fewer or shorter inputs, or ask the wallet owner/);
      await assertBilledOnce(h, w, 1_000_000, fakeTokensOf([TEXT]));
    });

    test('a key whose model list leaves the embedding model out is refused with 403 before anything is reserved', async () => {
      const w = await h.wallet(1_000_000);
      const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, { ...(await siweProof(w.account)), models: ['fake/chat-small'] });
      assert.equal(patched.status, 200, patched.text);
      const calls = h.fake.received.length;
      const res = await embed(w.key);
      assert.equal(res.status, 403);
      assert.equal(res.body.error, 'MODEL_NOT_ALLOWED');
      assert.equal(h.fake.received.length, calls);
      assert.equal((await usageRowsOf(h, w.keyId)).length, 0);
      assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000);
    });

    describe('attack: a provider lying about usage', () => {
      test('a keyed request is charged what the balance allows and the over-reservation is reported, as for chat', async () => {
        const m = h.gw.services.metrics;
        const [count, excess] = [await total(m.overReservation), await total(m.overReservationUsdc)];
        h.fake.behaviour = { usage: { prompt_tokens: 1_000_000, completion_tokens: 0 } };
        const w = await h.wallet(50_000);
        const res = await embed(w.key);
        assert.equal(res.status, 200, res.text);
        // The wallet holds less than the lie: all of it is charged, never more (no negative balance).
        assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), 50_000);
        assert.deepEqual(await h.balance(w.account), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
        assert.equal((await total(m.overReservation)) - count, 1);
        assert.equal((await total(m.overReservationUsdc)) - excess, 1_000_000 * MICRO_PER_TOKEN - RESERVATION);
      });

      test('a key with a spend limit is charged no more than the reservation its limit admitted', async () => {
        h.fake.behaviour = { usage: { prompt_tokens: 1_000_000, completion_tokens: 0 } };
        const w = await h.wallet(1_000_000);
        const patched = await call(h.gw.url, 'PATCH', `/v1/auth/keys/${w.keyId}`, { ...(await siweProof(w.account)), spend_limit_usdc: 100_000 });
        assert.equal(patched.status, 200, patched.text);
        const res = await embed(w.key);
        assert.equal(res.status, 200, res.text);
        assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), RESERVATION);
        assert.equal((await h.balance(w.account)).balance_usdc, 1_000_000 - RESERVATION);
      });
    });

    describe('attack: many honest users at once', () => {
      test('twenty wallets sending batches at the same time are each billed exactly their own tokens', async () => {
        const users = await Promise.all(Array.from({ length: 20 }, () => h.wallet(1_000_000)));
        const batches = users.map((_, i) => Array.from({ length: 1 + (i % 4) }, (_, j) => `user ${i} document ${j} ${'words '.repeat(i)}`));
        const results = await Promise.all(users.map((u, i) => embed(u.key, { input: batches[i] })));
        results.forEach((r, i) => assert.equal(r.status, 200, `user ${i}: ${r.text}`));
        for (const [i, u] of users.entries()) await assertBilledOnce(h, u, 1_000_000, fakeTokensOf(batches[i]!));
      });
    });

    describe('attack: concurrent requests draining a small balance', () => {
      test('exactly as many succeed as the balance covers; the rest are 402 and cost nothing', async () => {
        // Slow answers keep every admitted request in flight, so admission is decided by reservations alone.
        h.fake.behaviour = { delayMs: 300 };
        const covered = 3;
        const funds = covered * RESERVATION + RESERVATION - 1;
        const w = await h.wallet(funds);
        const results = await Promise.all(Array.from({ length: 12 }, () => embed(w.key)));
        const statuses = results.map((r) => r.status).sort();
        assert.deepEqual(statuses, [...Array(covered).fill(200), ...Array(12 - covered).fill(402)]);
        assert.deepEqual(await h.balance(w.account), { balance_usdc: funds - covered * CHARGE, locked_usdc: 0, available_usdc: funds - covered * CHARGE });
        const rows = await usageRowsOf(h, w.keyId);
        assert.deepEqual(
          rows.map((r) => Number(r.charged_usdc)),
          Array(covered).fill(CHARGE),
        );
      });
    });
  });
}
