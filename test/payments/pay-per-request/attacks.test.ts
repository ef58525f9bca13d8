import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { until } from '../../support/until.ts';
import { USD } from '../../support/topup-harness.ts';
import { v2Header, type Eip3009Terms } from '../../support/x402-payloads.ts';

/**
 * Pay-per-request x402 on chat completions: the payment header on the request itself
 * is both money and authorization, so it is attacked as both.
 */
const CENT = 10_000;
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
// Reserves about 9,800 µ of the 10,000 µ price: two of them never fit one payment at once.
const NEAR_CENT = { ...BODY, max_tokens: 4000 };

describe('pay-per-request attacks (sqlite)', () => {
  let h: PayPerRequestHarness;
  let offer: PaymentRequirements;
  before(async () => {
    h = await startPayPerRequestHarness('sqlite');
    offer = (await h.chat(BODY)).body.accepts[0];
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
  });

  const pay = async (payer: FundedAccount, over: Partial<Eip3009Terms> = {}) => v2Header(offer, await h.usdcPayment(payer, BigInt(CENT), over));
  const db = () => h.gw.services.storage.db;
  const creditsOf = async (payer: FundedAccount) =>
    (await db().selectFrom('ledger_entries').select('amount_usdc').where('wallet', '=', payer.address.toLowerCase()).where('kind', '=', 'topup').execute()).map(
      (r) => Number(r.amount_usdc),
    );
  const chargedOf = async (payer: FundedAccount) =>
    (await db().selectFrom('request_usage').select('charged_usdc').where('wallet', '=', payer.address.toLowerCase()).execute()).map((r) =>
      Number(r.charged_usdc),
    );

  test('replay: credits nothing more, runs no inference the balance cannot cover, and runs one it can', async () => {
    const payer = await h.payer(1n);
    const header = await pay(payer);
    // A long answer (2,000 tokens: 4,812 µ) leaves less of the cent than the reservation needs.
    h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 2_000 } };
    const first = await h.chat(NEAR_CENT, { 'payment-signature': header }).finally(() => (h.fake.behaviour = {}));
    assert.equal(first.status, 200, first.text);
    assert.equal(Number(first.headers.get('x-tollgate-charged-usdc')), 4_812);
    const calls = h.fake.received.length;
    // What is left of the cent no longer covers this request's reservation.
    for (const name of ['payment-signature', 'x-payment']) {
      const replay = await h.chat(NEAR_CENT, { [name]: header });
      assert.equal(replay.status, 402, replay.text);
      assert.equal(replay.body.error, 'INSUFFICIENT_BALANCE');
      assert.ok(replay.headers.get('payment-required'), 'a fresh offer');
      assert.equal(replay.headers.get('payment-response'), null);
    }
    assert.equal(h.fake.received.length, calls, 'a replay reached the provider');
    assert.deepEqual(await creditsOf(payer), [CENT], 'a replay credited again');
    // Once the balance covers it (the payer topped up otherwise), the same payment runs it, still credited once.
    await adjustBalance(db(), { wallet: payer.address.toLowerCase(), amountUsdc: CENT, note: 'test funding' });
    const covered = await h.chat(NEAR_CENT, { 'payment-signature': header });
    assert.equal(covered.status, 200, covered.text);
    assert.deepEqual(await creditsOf(payer), [CENT]);
    const charged = await chargedOf(payer);
    assert.equal(await h.balance(payer.address), 2 * CENT - charged.reduce((a, b) => a + b, 0));
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - BigInt(CENT), 'paid twice on chain');
    await h.gw.assertLedger();
  });

  test('replay after the authorization expired spends nothing: a leaked header is not a lasting credential', async () => {
    const payer = await h.payer(1n);
    // The facilitator wants at least 6 s of validity left; 8 s expire during this test.
    const header = await pay(payer, { validBefore: BigInt(Math.floor(Date.now() / 1000) + 8) });
    assert.equal((await h.chat(BODY, { 'payment-signature': header })).status, 200);
    const left = await h.balance(payer.address);
    assert.ok(left > 0);
    await new Promise((r) => setTimeout(r, 8_500));
    const calls = h.fake.received.length;
    const late = await h.chat(BODY, { 'payment-signature': header });
    assert.equal(late.status, 402, late.text);
    assert.equal(late.body.error, 'PAYMENT_EXPIRED');
    assert.equal(h.fake.received.length, calls);
    assert.equal(await h.balance(payer.address), left);
    assert.deepEqual(await creditsOf(payer), [CENT]);
  });

  test('body changed between the 402 and the paid retry: the retry is priced and bounded from its own body', async () => {
    const payer = await h.payer(1n);
    const header = await pay(payer); // paid for BODY's price: one cent
    const calls = h.fake.received.length;
    // Bigger: two choices of 4,096 tokens cost more than the cent that was signed. Nothing is settled.
    const bigger = await h.chat({ ...NEAR_CENT, n: 3 }, { 'payment-signature': header });
    assert.equal(bigger.status, 402, bigger.text);
    assert.equal(bigger.body.error, 'PAYMENT_INSUFFICIENT');
    assert.ok(bigger.body.required_usdc > CENT);
    // Invalid: refused before anything is settled.
    const invalid = await h.chat({ ...BODY, max_tokens: 1_000_000 }, { 'payment-signature': header });
    assert.equal(invalid.status, 400, invalid.text);
    assert.equal(h.fake.received.length, calls);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD, 'something was settled');
    assert.equal((await db().selectFrom('payments').select('id').where('payer', '=', payer.address.toLowerCase()).execute()).length, 0);
    // Different but still covered: it runs with the limit of the body actually sent, never the first one's.
    const other = await h.chat({ ...BODY, max_tokens: 7, messages: [{ role: 'user', content: 'something else' }] }, { 'payment-signature': header });
    assert.equal(other.status, 200, other.text);
    const sent = h.fake.received.at(-1)!.body;
    assert.equal(sent.max_tokens, 7);
    assert.equal(sent.messages[0].content, 'something else');
    const [charged] = await chargedOf(payer);
    assert.equal(await h.balance(payer.address), CENT - charged!);
    await h.gw.assertLedger();
  });

  test('two paid retries with the same payment at once: one credit, and only what the payment covers runs', async () => {
    const payer = await h.payer(1n);
    const header = await pay(payer);
    // Slow answers keep the first reservation held while the second one tries.
    h.fake.behaviour = { delayMs: 1_500 };
    try {
      const calls = h.fake.received.length;
      const [a, b] = await Promise.all([h.chat(NEAR_CENT, { 'payment-signature': header }), h.chat(NEAR_CENT, { 'payment-signature': header })]);
      assert.deepEqual([a.status, b.status].sort(), [200, 402], `${a.text}\n${b.text}`);
      assert.equal([a, b].find((r) => r.status === 402)!.body.error, 'INSUFFICIENT_BALANCE');
      assert.equal(h.fake.received.length, calls + 1);
    } finally {
      h.fake.behaviour = {};
    }
    assert.deepEqual(await creditsOf(payer), [CENT]);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - BigInt(CENT));
    const [charged] = await chargedOf(payer);
    assert.equal(await h.balance(payer.address), CENT - charged!);
    await h.gw.assertLedger();
  });

  test('a provider that lies about usage takes no more than the price it was quoted, not the rest of the wallet', async () => {
    const payer = await h.payer(1n);
    // The payer also holds 5 USD from an earlier top-up, which this request was never priced against.
    await adjustBalance(db(), { wallet: payer.address.toLowerCase(), amountUsdc: 5_000_000, note: 'test funding' });
    h.fake.behaviour = { usage: { prompt_tokens: 1_000_000, completion_tokens: 1_000_000 } };
    try {
      const res = await h.chat(BODY, { 'payment-signature': await pay(payer) });
      assert.equal(res.status, 200, res.text);
      const reservation = await db()
        .selectFrom('reservations')
        .select(['amount_usdc', 'charged_usdc'])
        .where('wallet', '=', payer.address.toLowerCase())
        .executeTakeFirstOrThrow();
      assert.equal(Number(res.headers.get('x-tollgate-charged-usdc')), Number(reservation.amount_usdc));
      assert.equal(Number(reservation.charged_usdc), Number(reservation.amount_usdc));
      assert.equal(await h.balance(payer.address), 5_000_000 + CENT - Number(reservation.amount_usdc));
    } finally {
      h.fake.behaviour = {};
    }
    await h.gw.assertLedger();
  });

  test('client gone right after settlement: the payment stays credited, the answer is drained and billed once', async () => {
    for (const stream of [false, true]) {
      const payer = await h.payer(1n);
      const calls = h.fake.received.length;
      h.fake.behaviour = stream ? { chunkDelayMs: 100 } : { delayMs: 500 };
      try {
        const abort = new AbortController();
        const sent = fetch(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'payment-signature': await pay(payer) },
          body: JSON.stringify({ ...BODY, stream }),
          signal: abort.signal,
        }).catch(() => undefined);
        // The provider is only called after the payment settled: leave then.
        await until(() => h.fake.received.length > calls, 'the provider was called');
        abort.abort();
        await sent;
        await until(async () => (await chargedOf(payer)).length === 1, 'the request was billed');
      } finally {
        h.fake.behaviour = {};
      }
      const [charged] = await chargedOf(payer);
      assert.ok(charged! > 0, `${stream ? 'stream' : 'json'}: a produced answer was not billed`);
      assert.deepEqual(await creditsOf(payer), [CENT]);
      assert.equal(await h.balance(payer.address), CENT - charged!);
      const locked = await db().selectFrom('wallets').select('locked_usdc').where('address', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();
      assert.equal(Number(locked.locked_usdc), 0);
      await h.gw.assertLedger();
    }
  });

  test('the pay-per-request key attributes usage but is no credential', async () => {
    const payer = await h.payer(1n);
    assert.equal((await h.chat(BODY, { 'payment-signature': await pay(payer) })).status, 200);
    const row = await db().selectFrom('api_keys').select(['key_hash', 'label']).where('wallet', '=', payer.address.toLowerCase()).executeTakeFirstOrThrow();
    assert.equal(row.label, 'x402 pay-per-request');
    // Real keys are stored as 64 hex digits of HMAC; this one can never equal a bearer token's hash.
    assert.doesNotMatch(row.key_hash, /^[0-9a-f]{64}$/);
    for (const token of [row.key_hash, `sk-${row.key_hash}`]) {
      const res = await h.chat(BODY, { authorization: `Bearer ${token}` });
      assert.equal(res.status, 401, res.text);
    }
  });
});
