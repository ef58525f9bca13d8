import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { FacilitatorUnavailable, SettlementUnknown } from '../../../src/payments/facilitator/facilitator.ts';
import { ENGINES } from '../../support/engines.ts';
import { call } from '../../support/gateway.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { createKeyProof } from '../../support/siwe.ts';
import { USD } from '../../support/topup-harness.ts';
import { until } from '../../support/until.ts';
import { signPermit2, v1Header, v2Header } from '../../support/x402-payloads.ts';

/**
 * Attacks on the rule "a top-up's payment never pays for chat" and on what a header
 * that runs nothing may still do: every route and order in which a top-up's header can reach a
 * paid chat route (credited, settling, failed and reclaimed, abandoned and released, left pending),
 * and the payer's rate-limit window, which a refused or expired header must not use up. What is
 * left (a top-up header refused before it was ever recorded) is in SECURITY.md, residual risk.
 */
const CENT = 10_000;
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user', content: 'hello' }], max_tokens: 100 };
const PER_MINUTE = 3;
const MAX_TIMEOUT_SECONDS = 300;
const ROUTES: Array<{ path: string; body: Record<string, unknown> }> = [
  { path: '/v1/chat/completions', body: BODY },
  { path: '/v1/responses', body: { model: 'fake/chat-small', max_output_tokens: 100, input: 'hello' } },
  { path: '/v1/messages', body: { model: 'fake/chat-small', max_tokens: 100, messages: [{ role: 'user', content: 'hello' }] } },
];

for (const engine of ENGINES) {
  describe(`attack: a top-up's header on chat routes, refused headers and the rate limit (${engine})`, () => {
    let h: PayPerRequestHarness;
    let offer: PaymentRequirements;
    before(async () => {
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
    const post = (path: string, body: unknown, headers: Record<string, string>) => call(h.gw.url, 'POST', path, body, headers);
    const creditsOf = async (payer: FundedAccount) =>
      (
        await db().selectFrom('ledger_entries').select('amount_usdc').where('wallet', '=', payer.address.toLowerCase()).where('kind', '=', 'topup').execute()
      ).map((r) => Number(r.amount_usdc));
    const rowsOf = (payer: FundedAccount) => db().selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();
    const keyFor = async (account: FundedAccount) => {
      const res = await call(h.gw.url, 'POST', '/v1/auth/keys', await createKeyProof(account));
      assert.equal(res.status, 201, res.text);
      return res.body.key as string;
    };
    /** A dollar authorization: a valid top-up amount, and (taken whole) a valid pay-per-request payment. */
    const dollarPayload = (payer: FundedAccount) => h.usdcPayment(payer, USD);
    const dollarV2 = (payload: unknown) => v2Header({ ...offer, amount: String(USD) }, payload);

    /** Holds every settlement between verify and broadcast until `release()`. */
    const holdAtBroadcast = () => {
      const topupService = h.gw.services.topup!;
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let reached!: () => void;
      const atBroadcast = new Promise<void>((r) => (reached = r));
      topupService.beforeBroadcast = async () => {
        topupService.beforeBroadcast = undefined;
        reached();
        await held;
      };
      return { atBroadcast, release: () => release(), clear: () => ((topupService.beforeBroadcast = undefined), release()) };
    };

    test("a leaked top-up header sent to chat (refused) does not use up the payer's chat rate-limit window", async () => {
      const victim = await h.payer(2n);
      const dollar = dollarV2(await dollarPayload(victim));
      assert.equal((await h.post({ amount: 1 }, { 'payment-signature': dollar })).status, 200);
      const key = await keyFor(victim);
      const calls = h.fake.received.length;
      const answers: number[] = [];
      for (let i = 0; i < PER_MINUTE + 1; i++) answers.push((await h.chat(BODY, { 'payment-signature': dollar })).status);
      assert.equal(h.fake.received.length, calls, 'a top-up header reached the provider');
      // The refused header must not have counted: the victim's own key still has its window.
      const own = await h.chat(BODY, { authorization: `Bearer ${key}` });
      assert.equal(own.status, 200, `attacker saw ${answers.join(',')}; victim's own key: ${own.status} ${own.text}`);
      await h.gw.assertLedger();
    });

    test("an expired chat header (PAYMENT_EXPIRED, runs nothing) does not use up the payer's chat rate-limit window", async () => {
      const victim = await h.payer(1n);
      const header = v2Header(offer, await h.usdcPayment(victim, BigInt(CENT)));
      assert.equal((await h.chat(BODY, { 'payment-signature': header })).status, 200);
      const key = await keyFor(victim);
      const [row] = await rowsOf(victim);
      await db()
        .updateTable('payments')
        .set({ credited_at: Number(row!.credited_at) - (MAX_TIMEOUT_SECONDS + 1) * 1000 })
        .where('id', '=', row!.id)
        .execute();
      const calls = h.fake.received.length;
      const answers: number[] = [];
      for (let i = 0; i < PER_MINUTE; i++) answers.push((await h.chat(BODY, { 'payment-signature': header })).status);
      assert.equal(h.fake.received.length, calls);
      // The victim used 1 of PER_MINUTE itself; the expired replays ran nothing and must not count.
      const own = await h.chat(BODY, { authorization: `Bearer ${key}` });
      assert.equal(own.status, 200, `attacker saw ${answers.join(',')}; victim's own key: ${own.status} ${own.text}`);
      await h.gw.assertLedger();
    });

    for (const route of ROUTES) {
      test(`a credited top-up header runs nothing on ${route.path} (PAYMENT-SIGNATURE and X-Payment)`, async () => {
        const payer = await h.payer(2n);
        const payload = await dollarPayload(payer);
        assert.equal((await h.post({ amount: 1 }, { 'payment-signature': dollarV2(payload) })).status, 200);
        const calls = h.fake.received.length;
        for (const headers of [{ 'payment-signature': dollarV2(payload) }, { 'x-payment': v1Header(h.chain.network, payload) }] as Array<
          Record<string, string>
        >) {
          const res = await post(route.path, route.body, headers);
          assert.equal(res.status, 402, `${Object.keys(headers)[0]}: ${res.text}`);
          assert.equal(res.body.reason, 'topup_payment', res.text);
        }
        assert.equal(h.fake.received.length, calls);
        assert.deepEqual(await creditsOf(payer), [Number(USD)]);
        assert.equal(await h.balance(payer.address), Number(USD));
        await h.gw.assertLedger();
      });

      test(`a top-up header sent to ${route.path} while the top-up settles (v2 and v1 joiners at once) runs nothing`, async () => {
        const payer = await h.payer(2n);
        const payload = await dollarPayload(payer);
        const hold = holdAtBroadcast();
        try {
          const topup = h.post({ amount: 1 }, { 'payment-signature': dollarV2(payload) });
          await hold.atBroadcast;
          const calls = h.fake.received.length;
          const joiners = [
            post(route.path, route.body, { 'payment-signature': dollarV2(payload) }),
            post(route.path, route.body, { 'x-payment': v1Header(h.chain.network, payload) }),
            post(route.path, route.body, { 'payment-signature': dollarV2(payload) }),
          ];
          await new Promise((r) => setTimeout(r, 300));
          hold.release();
          const [t, ...stolen] = await Promise.all([topup, ...joiners]);
          assert.equal(t.status, 200, t.text);
          for (const s of stolen) {
            assert.equal(s.status, 402, s.text);
            assert.equal(s.body.reason, 'topup_payment', s.text);
          }
          assert.equal(h.fake.received.length, calls);
        } finally {
          hold.clear();
        }
        assert.deepEqual(await creditsOf(payer), [Number(USD)]);
        assert.equal(await h.balance(payer.address), Number(USD));
        await h.gw.assertLedger();
      });
    }

    test('a credited top-up header re-wrapped (other envelope fields, upper-case hex) is still the same payment: runs no chat', async () => {
      const payer = await h.payer(2n);
      const payload = await dollarPayload(payer);
      assert.equal((await h.post({ amount: 1 }, { 'payment-signature': dollarV2(payload) })).status, 200);
      const upper = {
        signature: `0x${payload.signature.slice(2).toUpperCase()}`,
        authorization: {
          ...payload.authorization,
          nonce: `0x${payload.authorization.nonce.slice(2).toUpperCase()}`,
          from: payload.authorization.from.toLowerCase(),
        },
      };
      const calls = h.fake.received.length;
      for (const header of [
        v2Header({ ...offer, amount: String(USD), maxTimeoutSeconds: 999_999, extra: { ...offer.extra, note: 'x' } }, payload),
        dollarV2(upper),
        v1Header(h.chain.network, upper),
      ]) {
        const res = await h.chat(BODY, { 'payment-signature': header });
        assert.equal(res.status, 402, res.text);
        assert.equal(res.body.reason, 'topup_payment', res.text);
      }
      assert.equal(h.fake.received.length, calls);
      assert.equal((await rowsOf(payer)).length, 1);
      await h.gw.assertLedger();
    });

    test('a Permit2 (USDT) top-up header, credited or settling, runs no chat', async () => {
      const payer = await h.payer(2n);
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const usdtOffer = (await h.post({ amount: 1 })).body.accepts.find((o: PaymentRequirements) => o.extra?.assetTransferMethod === 'permit2');
      const payload = await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: USD });
      const header = v2Header(usdtOffer, payload);
      const hold = holdAtBroadcast();
      const calls = h.fake.received.length;
      try {
        const topup = h.post({ amount: 1 }, { 'payment-signature': header });
        await hold.atBroadcast;
        const joined = h.chat(BODY, { 'payment-signature': header });
        await new Promise((r) => setTimeout(r, 300));
        hold.release();
        const [t, j] = await Promise.all([topup, joined]);
        assert.equal(t.status, 200, t.text);
        assert.equal(j.status, 402, j.text);
        assert.equal(j.body.reason, 'topup_payment');
      } finally {
        hold.clear();
      }
      const replay = await h.chat(BODY, { 'payment-signature': header });
      assert.equal(replay.status, 402, replay.text);
      assert.equal(replay.body.reason, 'topup_payment');
      assert.equal(h.fake.received.length, calls);
      assert.deepEqual(await creditsOf(payer), [Number(USD)]);
      await h.gw.assertLedger();
    });

    test('a top-up whose verify failed (row failed, purpose topup) reclaimed by chat: chat runs nothing, credited once', async () => {
      const payer = await h.payer(2n);
      const dollar = dollarV2(await dollarPayload(payer));
      const f = h.gw.services.topup!.facilitator as { verify: (...a: unknown[]) => Promise<unknown> };
      const realVerify = f.verify;
      f.verify = async () => {
        throw new FacilitatorUnavailable('facilitator down (test)');
      };
      let first;
      try {
        first = await h.post({ amount: 1 }, { 'payment-signature': dollar });
      } finally {
        f.verify = realVerify;
      }
      assert.equal(first.status, 503, first.text);
      const [failed] = await rowsOf(payer);
      assert.equal(failed!.status, 'failed');
      assert.equal(failed!.purpose, 'topup');
      const calls = h.fake.received.length;
      // The thief reclaims the failed row through chat (failed -> pending): this request opens it.
      const stolen = await h.chat(BODY, { 'payment-signature': dollar });
      assert.equal(stolen.status, 402, stolen.text);
      assert.equal(stolen.body.reason, 'topup_payment', stolen.text);
      assert.equal(h.fake.received.length, calls);
      const [after] = await rowsOf(payer);
      assert.equal(after!.purpose, 'topup', 'the reclaim changed the purpose');
      // The owner's retry of its top-up: credited once.
      const retry = await h.post({ amount: 1 }, { 'payment-signature': dollar });
      assert.equal(retry.status, 200, retry.text);
      assert.deepEqual(await creditsOf(payer), [Number(USD)]);
      assert.equal(await h.balance(payer.address), Number(USD));
      await h.gw.assertLedger();
    });

    test('a top-up released as never sent (abandoned) and reclaimed by a chat that joined it runs no chat', async () => {
      const payer = await h.payer(2n);
      const dollar = dollarV2(await dollarPayload(payer));
      // The top-up's process "dies" before broadcast: its settlement hangs for ever.
      const topupService = h.gw.services.topup!;
      let reached!: () => void;
      const atBroadcast = new Promise<void>((r) => (reached = r));
      let hang: (() => void) | undefined;
      topupService.beforeBroadcast = () => {
        topupService.beforeBroadcast = undefined;
        reached();
        return new Promise<void>((_r, reject) => (hang = () => reject(new Error('test: dead process'))));
      };
      const topup = h.post({ amount: 1 }, { 'payment-signature': dollar });
      await atBroadcast;
      const [row] = await rowsOf(payer);
      // Make the record look abandoned (older than the settle wait): the chat will release and reclaim it.
      await db()
        .updateTable('payments')
        .set({ updated_at: Number(row!.updated_at) - 60_000 })
        .where('id', '=', row!.id)
        .execute();
      const calls = h.fake.received.length;
      const stolen = await h.chat(BODY, { 'payment-signature': dollar });
      hang?.();
      await topup.catch(() => undefined);
      assert.equal(stolen.status, 402, stolen.text);
      assert.equal(stolen.body.reason, 'topup_payment', stolen.text);
      assert.equal(h.fake.received.length, calls);
      // The chat is refused before it may release, reclaim or settle a top-up's payment: nothing moved.
      assert.deepEqual(await creditsOf(payer), []);
      await h.gw.assertLedger();
    });

    test('chat first, top-up joins: the chat runs once, credited once; the top-up answers 200; replays of the chat header run within the window', async () => {
      const payer = await h.payer(2n);
      const dollar = dollarV2(await dollarPayload(payer));
      const hold = holdAtBroadcast();
      const calls = h.fake.received.length;
      try {
        const chat = h.chat(BODY, { 'payment-signature': dollar });
        await hold.atBroadcast;
        const topup = h.post({ amount: 1 }, { 'payment-signature': dollar });
        await new Promise((r) => setTimeout(r, 300));
        hold.release();
        const [c, t] = await Promise.all([chat, topup]);
        assert.equal(c.status, 200, c.text);
        assert.equal(t.status, 200, t.text);
      } finally {
        hold.clear();
      }
      assert.equal(h.fake.received.length, calls + 1);
      const [row] = await rowsOf(payer);
      assert.equal(row!.purpose, 'chat');
      assert.deepEqual(await creditsOf(payer), [Number(USD)]);
      await h.gw.assertLedger();
    });

    test('a chat payment left pending, credited by the reconciler, then resent: runs within the window from the credit, expired after it', async () => {
      const payer = await h.payer(1n);
      const header = v2Header(offer, await h.usdcPayment(payer, BigInt(CENT)));
      const f = h.gw.services.topup!.facilitator as { settle: (...a: unknown[]) => Promise<unknown> };
      const realSettle = f.settle;
      f.settle = async (...a: unknown[]) => {
        await realSettle.apply(f, a);
        throw new SettlementUnknown('timed out after sending (test)');
      };
      let first;
      try {
        first = await h.chat(BODY, { 'payment-signature': header });
      } finally {
        f.settle = realSettle;
      }
      assert.equal(first.status, 503, first.text);
      assert.equal(first.body.error, 'PAYMENT_PENDING');
      await h.gw.services.topup!.reconcile();
      await until(async () => (await rowsOf(payer))[0]!.status === 'credited', 'reconciler credit');
      const calls = h.fake.received.length;
      const resent = await h.chat(BODY, { 'payment-signature': header });
      assert.equal(resent.status, 200, resent.text);
      assert.equal(h.fake.received.length, calls + 1);
      const [row] = await rowsOf(payer);
      await db()
        .updateTable('payments')
        .set({ credited_at: Number(row!.credited_at) - (MAX_TIMEOUT_SECONDS + 1) * 1000 })
        .where('id', '=', row!.id)
        .execute();
      const late = await h.chat(BODY, { 'payment-signature': header });
      assert.equal(late.status, 402, late.text);
      assert.equal(late.body.error, 'PAYMENT_EXPIRED');
      assert.deepEqual(await creditsOf(payer), [CENT]);
      await h.gw.assertLedger();
    });

    test('a top-up left pending, credited by the reconciler, then sent to chat: runs nothing', async () => {
      const payer = await h.payer(2n);
      const dollar = dollarV2(await dollarPayload(payer));
      const f = h.gw.services.topup!.facilitator as { settle: (...a: unknown[]) => Promise<unknown> };
      const realSettle = f.settle;
      f.settle = async (...a: unknown[]) => {
        await realSettle.apply(f, a);
        throw new SettlementUnknown('timed out after sending (test)');
      };
      let first;
      try {
        first = await h.post({ amount: 1 }, { 'payment-signature': dollar });
      } finally {
        f.settle = realSettle;
      }
      assert.equal(first.status, 202, first.text);
      const calls = h.fake.received.length;
      // The chat joins the submitted row; the reconciler credits it while the chat waits.
      const stolen = h.chat(BODY, { 'payment-signature': dollar });
      await new Promise((r) => setTimeout(r, 200));
      await h.gw.services.topup!.reconcile();
      const s = await stolen;
      assert.equal(s.status, 402, s.text);
      assert.equal(s.body.reason, 'topup_payment');
      assert.equal(h.fake.received.length, calls);
      assert.deepEqual(await creditsOf(payer), [Number(USD)]);
      await h.gw.assertLedger();
    });
  });
}
