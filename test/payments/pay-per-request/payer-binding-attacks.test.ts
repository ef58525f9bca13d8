import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { adjustBalance } from '../../../src/ledger/movements.ts';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { createKeyProof } from '../../support/siwe.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { v2Header, type Eip3009Terms } from '../../support/x402-payloads.ts';

/**
 * Attacks on pay-per-request, beside test/payments/pay-per-request/attacks.test.ts:
 * who may use up a wallet's rate limit, how long a credited payment header stays a credential, and
 * the header combinations a client can send. Each test ends with the ledger invariants.
 */
const CENT = 10_000;
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
const PER_MINUTE = 3;
const MAX_TIMEOUT_SECONDS = 300;

for (const engine of ENGINES) {
  describe(`attack: a payment names its payer and purpose, and pays once (${engine})`, () => {
    let h: PayPerRequestHarness;
    let offer: PaymentRequirements;
    before(async () => {
      // A small per-wallet chat window, so that using it up takes a few requests.
      h = await startPayPerRequestHarness(engine, {
        config: { rateLimits: { chat: { perMinute: PER_MINUTE, perDay: 1_000 } }, topup: { maxTimeoutSeconds: MAX_TIMEOUT_SECONDS } },
      });
      offer = (await h.chat(BODY)).body.accepts[0];
    });
    after(async () => {
      await h.gw.assertLedger();
      await h.stop();
    });

    const db = () => h.gw.services.storage.db;
    const pay = async (payer: FundedAccount, over: Partial<Eip3009Terms> = {}) => v2Header(offer, await h.usdcPayment(payer, BigInt(CENT), over));
    const creditsOf = async (payer: FundedAccount) =>
      (
        await db().selectFrom('ledger_entries').select('amount_usdc').where('wallet', '=', payer.address.toLowerCase()).where('kind', '=', 'topup').execute()
      ).map((r) => Number(r.amount_usdc));
    const keyFor = async (account: FundedAccount) => {
      const res = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
      assert.equal(res.status, 201, res.text);
      return res.body.key as string;
    };
    /** Runs `fn` with the rate limiter's clock `ms` ahead (the limiter is the only reader of services.now). */
    const later = async <T>(ms: number, fn: () => Promise<T>): Promise<T> => {
      const services = h.gw.services as { now: () => number };
      const real = services.now;
      services.now = () => real() + ms;
      try {
        return await fn();
      } finally {
        services.now = real;
      }
    };

    test("a forged payment naming someone else as payer does not use up that wallet's chat rate limit", async () => {
      const victim = await h.payer(1n);
      const attacker = await h.payer(1n);
      const victimKey = await keyFor(victim);
      await adjustBalance(db(), { wallet: victim.address.toLowerCase(), amountUsdc: CENT, note: 'test funding' });
      const calls = h.fake.received.length;
      // Signed by the attacker, but `from` says the victim: the facilitator will refuse it, yet the
      // payer it names is known before any signature is checked.
      for (let i = 0; i < PER_MINUTE + 1; i++) {
        const forged = await pay(victim, { from: { address: victim.address }, signer: attacker });
        const res = await h.chat(BODY, { 'payment-signature': forged });
        assert.equal(res.status, 402, res.text);
        assert.equal(res.body.error, 'PAYMENT_REJECTED');
      }
      assert.equal(h.fake.received.length, calls, 'a forged payment reached the provider');
      // The victim's own key still has its whole window.
      const own = await h.chat(BODY, { authorization: `Bearer ${victimKey}` });
      assert.equal(own.status, 200, own.text);
      assert.equal(Number(own.headers.get('x-ratelimit-remaining')), PER_MINUTE - 1);
      assert.deepEqual(await creditsOf(victim), []);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, victim.address), USD);
      await h.gw.assertLedger();
    });

    test("a verified payment still counts against its wallet's limit, replays included, and a refused one is not settled and works later", async () => {
      const payer = await h.payer(1n);
      const header = await pay(payer);
      // One fresh payment and its replays: PER_MINUTE requests run, the next is 429 before anything.
      for (let i = 0; i < PER_MINUTE; i++) assert.equal((await h.chat(BODY, { 'payment-signature': header })).status, 200);
      const calls = h.fake.received.length;
      const over = await h.chat(BODY, { 'payment-signature': header });
      assert.equal(over.status, 429, over.text);
      // A new payment over the limit is verified but neither settled nor credited.
      const fresh = await pay(payer);
      const refused = await h.chat(BODY, { 'payment-signature': fresh });
      assert.equal(refused.status, 429, refused.text);
      assert.equal(h.fake.received.length, calls, 'a rate-limited request reached the provider');
      assert.deepEqual(await creditsOf(payer), [CENT]);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - BigInt(CENT), 'a refused payment was settled');
      // A minute later the very same payment goes through: the refusal left nothing locked.
      const retried = await later(61_000, () => h.chat(BODY, { 'payment-signature': fresh }));
      assert.equal(retried.status, 200, retried.text);
      assert.deepEqual(await creditsOf(payer), [CENT, CENT]);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - 2n * BigInt(CENT));
      await h.gw.assertLedger();
    });

    test('a credited payment header stops paying for requests topup.maxTimeoutSeconds after its credit, whatever validBefore the payer signed', async () => {
      const payer = await h.payer(1n);
      // A hand-rolled client that signs for a day, not for the offer's maxTimeoutSeconds.
      const header = await pay(payer, { validBefore: BigInt(Math.floor(Date.now() / 1000) + 86_400) });
      assert.equal((await h.chat(BODY, { 'payment-signature': header })).status, 200);
      const payment = await db()
        .selectFrom('payments')
        .select(['id', 'credited_at'])
        .where('payer', '=', payer.address.toLowerCase())
        .executeTakeFirstOrThrow();
      // Within the window the replay runs (a client that lost the answer may retry).
      assert.equal((await h.chat(BODY, { 'payment-signature': header })).status, 200);
      // The header leaks; its thief comes back after the window (the credit is moved back in time).
      await db()
        .updateTable('payments')
        .set({ credited_at: Number(payment.credited_at) - (MAX_TIMEOUT_SECONDS + 1) * 1000 })
        .where('id', '=', payment.id)
        .execute();
      const left = await h.balance(payer.address);
      const calls = h.fake.received.length;
      const stolen = await h.chat(BODY, { 'payment-signature': header });
      assert.equal(stolen.status, 402, stolen.text);
      assert.equal(stolen.body.error, 'PAYMENT_EXPIRED');
      assert.equal(h.fake.received.length, calls);
      assert.equal(await h.balance(payer.address), left);
      assert.deepEqual(await creditsOf(payer), [CENT]);
      await h.gw.assertLedger();
    });

    test('an Authorization header with a payment header: the key pays, the payment is neither settled nor credited', async () => {
      const payer = await h.payer(1n);
      const key = await keyFor(payer);
      await adjustBalance(db(), { wallet: payer.address.toLowerCase(), amountUsdc: CENT, note: 'test funding' });
      const header = await pay(payer);
      const res = await h.chat(BODY, { authorization: `Bearer ${key}`, 'payment-signature': header, 'x-payment': header });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers.get('payment-response'), null);
      const bad = await h.chat(BODY, { authorization: 'Bearer sk-wrong', 'payment-signature': header });
      assert.equal(bad.status, 401, bad.text);
      assert.deepEqual(await creditsOf(payer), []);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD);
      await h.gw.assertLedger();
    });

    test('two different payments in PAYMENT-SIGNATURE and X-Payment: only PAYMENT-SIGNATURE is settled, once', async () => {
      const payer = await h.payer(1n);
      const [v2, v1] = [await pay(payer), await pay(payer)];
      const res = await h.chat(BODY, { 'payment-signature': v2, 'x-payment': v1 });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(await creditsOf(payer), [CENT]);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - BigInt(CENT));
      await h.gw.assertLedger();
    });

    test("a top-up's payment header sent to chat runs nothing, even within its window: a leaked top-up header is no chat credential", async () => {
      const payer = await h.payer(2n);
      const dollar = v2Header({ ...offer, amount: String(USD) }, await h.usdcPayment(payer, USD));
      const topup = await h.post({ amount: 1 }, { 'payment-signature': dollar });
      assert.equal(topup.status, 200, topup.text);
      const calls = h.fake.received.length;
      const stolen = await h.chat(BODY, { 'payment-signature': dollar });
      assert.equal(stolen.status, 402, stolen.text);
      assert.equal(stolen.body.error, 'PAYMENT_REJECTED');
      assert.equal(stolen.body.reason, 'topup_payment');
      assert.equal(h.fake.received.length, calls);
      assert.equal(await h.balance(payer.address), Number(USD));
      assert.deepEqual(await creditsOf(payer), [Number(USD)]);
      await h.gw.assertLedger();
    });

    test("attack: a top-up's payment header sent to chat while the top-up is still settling runs nothing", async () => {
      const payer = await h.payer(2n);
      const dollar = v2Header({ ...offer, amount: String(USD) }, await h.usdcPayment(payer, USD));
      // Hold the top-up between verify and broadcast, so the chat surely arrives while it settles
      // and joins the row the top-up opened (the reported race had 15 ms between the two).
      const topupService = h.gw.services.topup!;
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let reached!: () => void;
      const atBroadcast = new Promise<void>((r) => (reached = r));
      topupService.beforeBroadcast = async () => {
        reached();
        await held;
      };
      try {
        const topup = h.post({ amount: 1 }, { 'payment-signature': dollar });
        await atBroadcast;
        topupService.beforeBroadcast = undefined;
        const calls = h.fake.received.length;
        const chat = h.chat(BODY, { 'payment-signature': dollar });
        // Let the chat find the recorded row and start waiting on it, then let the top-up settle.
        await until(async () => (await db().selectFrom('payments').select('id').where('payer', '=', payer.address.toLowerCase()).execute()).length === 1);
        await new Promise((r) => setTimeout(r, 200));
        release();
        const [t, stolen] = await Promise.all([topup, chat]);
        assert.equal(t.status, 200, t.text);
        assert.equal(stolen.status, 402, stolen.text);
        assert.equal(stolen.body.error, 'PAYMENT_REJECTED');
        assert.equal(stolen.body.reason, 'topup_payment');
        assert.equal(h.fake.received.length, calls, 'the joined chat reached the provider');
      } finally {
        topupService.beforeBroadcast = undefined;
        release();
      }
      assert.equal(await h.balance(payer.address), Number(USD));
      assert.deepEqual(await creditsOf(payer), [Number(USD)]);
      await h.gw.assertLedger();
    });

    test('a chat payment sent twice at once runs both requests and credits once (the second joins the first, a replay within its window)', async () => {
      const payer = await h.payer(1n);
      const header = await pay(payer);
      const [a, b] = await Promise.all([h.chat(BODY, { 'payment-signature': header }), h.chat(BODY, { 'payment-signature': header })]);
      assert.equal(a.status, 200, a.text);
      assert.equal(b.status, 200, b.text);
      assert.deepEqual(await creditsOf(payer), [CENT]);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD - BigInt(CENT));
      await h.gw.assertLedger();
    });

    test('a chat payment sent again to /v1/topup credits nothing more', async () => {
      const payer = await h.payer(2n);
      // A dollar for a cent's request (taken whole), so that it is also a valid top-up amount.
      const dollar = v2Header({ ...offer, amount: String(USD) }, await h.usdcPayment(payer, USD));
      assert.equal((await h.chat(BODY, { 'payment-signature': dollar })).status, 200);
      const again = await h.post({ amount: 1 }, { 'payment-signature': dollar });
      assert.equal(again.status, 200, again.text);
      assert.equal(again.body.credited_usdc, Number(USD));
      assert.deepEqual(await creditsOf(payer), [Number(USD)]);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), USD);
      await h.gw.assertLedger();
    });
  });
}
