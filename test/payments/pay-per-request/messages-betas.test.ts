import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../../../src/fake-providers/fake-anthropic.ts';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import { ANTHROPIC_KEY, CLAUDE } from '../../support/anthropic-harness.ts';
import { MODELS } from '../../support/chat-harness.ts';
import { call } from '../../support/gateway.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { createKeyProof } from '../../support/siwe.ts';
import { USD } from '../../support/topup-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';

/**
 * A native Messages request (an Anthropic model) paid per request is planned from its body alone:
 * the paid path (src/http/x402/pay-per-request.ts, paidChat) never hands the client's
 * `anthropic-beta` header to the planner and never sets the plan's response headers. So, unlike the
 * same request sent with an API key (src/http/routes/chat.ts):
 * - price-neutral betas (Claude Code's interleaved-thinking, context-management, ...) are silently
 *   not forwarded, and the fields that need them then fail or change meaning at Anthropic;
 * - a priced beta (context-1m, fast mode) that a keyed request is refused for with a 400 before
 *   anything is reserved is silently dropped: the payment is settled and the request runs without it;
 * - `x-tollgate-betas-dropped` and `x-tollgate-max-tokens` (the lowered max_tokens) are missing.
 * The keyed request is the reference: a paid request must be served as it is.
 */
const MODEL = `${CLAUDE.provider}/${CLAUDE.name}`;
// Above the model's maxOutputTokens (4,096): lowered, and said in x-tollgate-max-tokens.
const BODY = { model: MODEL, max_tokens: 8000, messages: [{ role: 'user', content: 'hello' }] };
const BETAS = 'interleaved-thinking-2025-05-14,not-a-reviewed-beta-2099-01-01';

describe("pay-per-request × native Messages: the client's anthropic-beta and the plan's headers (sqlite)", () => {
  let h: PayPerRequestHarness;
  let anthropic: FakeAnthropic;
  before(async () => {
    anthropic = await startFakeAnthropic({ apiKey: ANTHROPIC_KEY });
    h = await startPayPerRequestHarness('sqlite', {
      config: {
        models: [...MODELS, CLAUDE],
        providers: { anth: { type: 'anthropic', baseUrl: anthropic.url, apiKeyEnv: 'ANTH_KEY' } },
      },
      env: { ANTH_KEY: ANTHROPIC_KEY },
    }).catch(async (err) => {
      await anthropic.close();
      throw err;
    });
  });
  after(async () => {
    await h?.gw.assertLedger();
    await h?.stop();
    await anthropic.close();
  });

  const messages = (body: unknown, headers: Record<string, string>) =>
    call(h.gw.url, 'POST', '/v1/messages', body, { 'anthropic-version': '2023-06-01', ...headers });
  const keyFor = async (account: FundedAccount) => {
    const res = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
    assert.equal(res.status, 201, res.text);
    await adjustBalance(h.gw.services.storage.db, { wallet: account.address.toLowerCase(), amountUsdc: 1_000_000, note: 'test funding' });
    return res.body.key as string;
  };
  /** A dollar authorization: above any price here, taken whole (the rest stays in the balance). */
  const dollar = async (payer: FundedAccount) => {
    const offer = (await messages(BODY, {})).body.accepts[0];
    return v2Header({ ...offer, amount: String(USD) }, await h.usdcPayment(payer, USD));
  };

  test('keyed and paid alike: price-neutral betas forwarded, the others named in x-tollgate-betas-dropped, the lowered max_tokens said', async () => {
    const owner = await h.payer(0n);
    const keyed = await messages(BODY, { 'x-api-key': await keyFor(owner), 'anthropic-beta': BETAS });
    assert.equal(keyed.status, 200, keyed.text);
    assert.equal(anthropic.received.at(-1)!.headers['anthropic-beta'], 'interleaved-thinking-2025-05-14', 'the reference: a keyed request forwards it');
    assert.equal(keyed.headers.get('x-tollgate-betas-dropped'), 'not-a-reviewed-beta-2099-01-01');
    assert.equal(keyed.headers.get('x-tollgate-max-tokens'), '4096');

    const payer = await h.payer(1n);
    const paid = await messages(BODY, { 'payment-signature': await dollar(payer), 'anthropic-beta': BETAS });
    assert.equal(paid.status, 200, paid.text);
    assert.ok(paid.headers.get('payment-response'), 'paid and settled');
    assert.equal(anthropic.received.at(-1)!.body.max_tokens, 4096);
    assert.equal(anthropic.received.at(-1)!.headers['anthropic-beta'], 'interleaved-thinking-2025-05-14', "the paid request's beta was not forwarded");
    assert.equal(paid.headers.get('x-tollgate-betas-dropped'), 'not-a-reviewed-beta-2099-01-01');
    assert.equal(paid.headers.get('x-tollgate-max-tokens'), '4096');
    await h.gw.assertLedger();
  });

  test('a priced beta is a 400 before any payment is settled, as it is for a key, never silently dropped from a paid request', async () => {
    const owner = await h.payer(0n);
    const keyed = await messages(BODY, { 'x-api-key': await keyFor(owner), 'anthropic-beta': 'context-1m-2025-08-07' });
    assert.equal(keyed.status, 400, keyed.text);

    const payer = await h.payer(1n);
    const calls = anthropic.received.length;
    const paid = await messages(BODY, { 'payment-signature': await dollar(payer), 'anthropic-beta': 'context-1m-2025-08-07' });
    assert.equal(paid.status, 400, `a paid request with a priced beta ran: ${paid.status} ${paid.text.slice(0, 200)}`);
    assert.equal(anthropic.received.length, calls);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD, 'the payment was settled for a request the gateway refuses with a key');
    await h.gw.assertLedger();
  });
});
