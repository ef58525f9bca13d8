import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { BatchSettlementEvmScheme, computeChannelId, signVoucher } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { toClientEvmSigner } from '@x402/evm';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { call } from '../../support/gateway.ts';
import { CHAT_BODY, channelOf, channelOffersOf, channelPayer, channelSuite, openedChannel, paid, voucherHeader } from './channel-harness.ts';

/**
 * A fresh reviewer's attacks on the batch-settlement request path. Each BREAK is a `todo` test
 * that asserts the safe behaviour and fails on the code as it is; its message says what happened.
 */

const ZERO_SALT = `0x${'00'.repeat(32)}` as const;

/** The usdc batch-settlement entry of a request's 402. */
async function usdcEntry(h: PayPerRequestHarness, body: unknown): Promise<PaymentRequirements> {
  const asked = await h.chat(body);
  assert.equal(asked.status, 402, asked.text);
  return channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
}

/**
 * The channel config of `victim`'s stock-client channel as a stranger builds it: the victim's
 * public address, the stock client's default salt (zero), the rest from the gateway's own 402.
 */
function strangersConfig(victim: FundedAccount, offer: PaymentRequirements) {
  const extra = offer.extra as { receiverAuthorizer: `0x${string}`; withdrawDelay: number };
  return {
    payer: victim.address,
    payerAuthorizer: victim.address,
    receiver: offer.payTo as `0x${string}`,
    receiverAuthorizer: extra.receiverAuthorizer,
    token: offer.asset as `0x${string}`,
    withdrawDelay: extra.withdrawDelay,
    salt: ZERO_SALT,
  };
}

/** A chat body whose 402 asks a batch-settlement ceiling of exactly `target` micro-USDC (searched by prompt length and max_tokens). */
async function bodyWithCeiling(h: PayPerRequestHarness, target: number) {
  for (let pad = 0; pad < 40; pad++) {
    const body = (max: number) => ({ ...CHAT_BODY, messages: [{ role: 'user' as const, content: `hi${'x'.repeat(pad)}` }], max_tokens: max });
    let [lo, hi] = [1, 4000];
    while (lo <= hi) {
      const mid = Math.floor((lo + hi) / 2);
      const offer = await usdcEntry(h, body(mid));
      const amount = Number(offer.amount);
      if (amount === target) return { body: body(mid), offer };
      if (amount < target) lo = mid + 1;
      else hi = mid - 1;
    }
  }
  throw new Error(`no chat body has a ceiling of ${target}`);
}

interface ProbeExtra {
  voucherState?: { signedMaxClaimable: string; signature: `0x${string}` };
  channelState: { chargedCumulativeAmount: string };
}

/** A victim's channel opened by the stock client, then probed by a stranger with a voucher of its own key: the 402 it gets. */
async function strangersProbe(h: PayPerRequestHarness) {
  const victim = await openedChannel(h);
  const offer = await usdcEntry(h, CHAT_BODY);
  const config = strangersConfig(victim, offer);
  const channelId = computeChannelId(config, offer.network);
  const probe = await signVoucher(toClientEvmSigner(privateKeyToAccount(generatePrivateKey())), channelId, '1', offer.network);
  const answer = await call(h.gw.url, 'POST', '/v1/chat/completions', CHAT_BODY, {
    'payment-signature': v2Header(offer, { type: 'voucher', channelConfig: config, voucher: probe }),
  });
  const extra = channelOffersOf(decodePaymentRequiredHeader(answer.headers.get('payment-required')!).accepts)[0]!.extra as unknown as ProbeExtra;
  return { victim, config, channelId, answer, extra };
}

/** A victim's channel and the refund endpoint's USDC entry, with the channel as anyone can name it. */
async function refundTarget(h: PayPerRequestHarness) {
  const victim = await openedChannel(h);
  const probe = await call(h.gw.url, 'GET', '/v1/channels/refund');
  assert.equal(probe.status, 402, probe.text);
  const offer = channelOffersOf(probe.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
  const config = strangersConfig(victim, offer);
  return { victim, offer, config, channelId: computeChannelId(config, offer.network) };
}

for (const engine of ENGINES) {
  describe(`attack: a fresh review of batch-settlement channels (${engine})`, () => {
    const harness = channelSuite(engine);

    test("a stranger's probe (a voucher signed by some other key) gets no corrective 402 with the payer's last voucher signature", async () => {
      const { answer, extra } = await strangersProbe(harness());
      assert.equal(answer.status, 402);
      assert.equal(extra.voucherState, undefined, "the payer's signature went to a stranger");
    });

    test("the payer's last voucher, taken from a corrective 402 by a stranger, does not buy the stranger a request billed to the payer's channel", async () => {
      const h = harness();
      const { victim, config, channelId, extra } = await strangersProbe(h);
      if (!extra.voucherState) return; // nothing leaked: nothing to replay
      const before = (await channelOf(h, victim))!;
      const gap = Number(extra.voucherState.signedMaxClaimable) - Number(extra.channelState.chargedCumulativeAmount);
      assert.ok(gap > 0, 'the victim was charged less than its last ceiling (a short answer)');
      const tuned = await bodyWithCeiling(h, gap);
      const calls = h.fake.received.length;
      const stolen = { channelId, maxClaimableAmount: extra.voucherState.signedMaxClaimable, signature: extra.voucherState.signature };
      const served = await call(h.gw.url, 'POST', '/v1/chat/completions', tuned.body, {
        'payment-signature': v2Header(tuned.offer, { type: 'voucher', channelConfig: config, voucher: stolen }),
      });
      const after = (await channelOf(h, victim))!;
      await assertLedgerConsistent(h.gw.services.storage.db);
      assert.notEqual(
        served.status,
        200,
        `a stranger was served (provider calls ${calls} -> ${h.fake.received.length}); the victim's channel charged ${before.charged_usdc} -> ${after.charged_usdc}`,
      );
    });
    test('a partial refund payload replayed (by anyone who saw it) refunds nothing more', async () => {
      const h = harness();
      const { victim, offer, config, channelId } = await refundTarget(h);
      const charged = (await channelOf(h, victim))!.charged_usdc;
      const voucher = await signVoucher(toClientEvmSigner(victim), channelId, String(charged), offer.network);
      const header = v2Header(offer, { type: 'refund', channelConfig: config, voucher, amount: '100000' });
      const first = await call(h.gw.url, 'GET', '/v1/channels/refund', undefined, { 'payment-signature': header });
      assert.equal(first.status, 200, first.text);
      const afterFirst = (await channelOf(h, victim))!;
      const replayed = await call(h.gw.url, 'GET', '/v1/channels/refund', undefined, { 'payment-signature': header });
      const afterReplay = (await channelOf(h, victim))!;
      await assertLedgerConsistent(h.gw.services.storage.db);
      assert.equal(
        afterReplay.refunded_usdc,
        afterFirst.refunded_usdc,
        `the replay answered ${replayed.status} and refunded again: ${afterFirst.refunded_usdc} -> ${afterReplay.refunded_usdc} (balance ${afterReplay.balance_usdc})`,
      );
      assert.equal(replayed.status, 402, replayed.text);
      assert.match(replayed.text, /refund_replayed/);
    });

    test("a refund payload signed by a stranger for the payer's channel is refused, nothing moved", async () => {
      const h = harness();
      const { victim, offer, config, channelId } = await refundTarget(h);
      const before = (await channelOf(h, victim))!;
      const voucher = await signVoucher(toClientEvmSigner(privateKeyToAccount(generatePrivateKey())), channelId, String(before.charged_usdc), offer.network);
      const answer = await call(h.gw.url, 'GET', '/v1/channels/refund', undefined, {
        'payment-signature': v2Header(offer, { type: 'refund', channelConfig: config, voucher }),
      });
      assert.notEqual(answer.status, 200, answer.text);
      assert.ok(answer.status < 500, answer.text);
      const after = (await channelOf(h, victim))!;
      assert.equal(after.refunded_usdc, before.refunded_usdc);
      assert.equal(after.balance_usdc, before.balance_usdc);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('the client disconnecting mid-stream: charged at most the ceiling, the channel let go, the stock client pays on', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      await payer.openai.chat.completions.create(CHAT_BODY);
      h.fake.behaviour = { content: Array.from({ length: 60 }, (_, i) => `w${i}`).join(' '), chunkDelayMs: 40 };
      try {
        const abort = new AbortController();
        const stream = await payer.openai.chat.completions.create({ ...CHAT_BODY, stream: true }, { signal: abort.signal });
        let chunks = 0;
        try {
          for await (const _ of stream) if (++chunks === 3) abort.abort();
        } catch {
          // the SDK may end the loop or throw on abort: either way the client went away
        }
        assert.ok(chunks < 20, `the client left after ${chunks} chunks, mid-stream`);
      } finally {
        h.fake.behaviour = {};
      }
      await settled(h, account);
      const row = (await channelOf(h, account))!;
      assert.ok(row.signed_max_usdc === null || row.charged_usdc <= row.signed_max_usdc);
      await assertLedgerConsistent(h.gw.services.storage.db);
      const next = await payer.openai.chat.completions.create(CHAT_BODY).withResponse();
      assert.ok(next.data.choices[0]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('the provider cutting a stream after partial output: charged within the ceiling, ledger clean, the stock client pays on', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      await payer.openai.chat.completions.create(CHAT_BODY);
      const before = (await channelOf(h, account))!;
      h.fake.behaviour = { content: 'one two three four five six seven eight', cutAfterChunks: 3 };
      try {
        const stream = await payer.openai.chat.completions.create({ ...CHAT_BODY, stream: true });
        await assert
          .rejects(
            (async () => {
              for await (const _ of stream);
            })(),
          )
          .catch(() => undefined);
      } finally {
        h.fake.behaviour = {};
      }
      await settled(h, account);
      const row = (await channelOf(h, account))!;
      assert.ok(row.charged_usdc - before.charged_usdc <= Number((await usdcEntry(h, { ...CHAT_BODY, stream: true })).amount));
      await assertLedgerConsistent(h.gw.services.storage.db);
      const next = await payer.openai.chat.completions.create(CHAT_BODY).withResponse();
      assert.ok(next.data.choices[0]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test("a deposit of only one request's top-up (the stock client's depositStrategy) is refused below extra.minDeposit: no deposit transaction", async () => {
      const h = harness();
      const account = await h.payer(10n);
      const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(account, h.chain.client(account)), {
        depositStrategy: (c: { minimumDepositAmount: string }) => c.minimumDepositAmount,
      });
      const client = new x402Client(
        (_v, accepts) => accepts.find((r) => r.scheme === 'batch-settlement' && r.asset.toLowerCase() === h.chain.usdc.toLowerCase())!,
      ).register('eip155:*', scheme);
      client.setSpendControls({
        maxAmountPerPayment: '$100',
        allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '100000000' }],
      });
      const paying = wrapFetchWithPayment(fetch, client) as typeof fetch;
      const minDeposit = Number((await usdcEntry(h, CHAT_BODY)).extra?.minDeposit);
      const calls = h.fake.received.length;
      const res = await paying(`${h.gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(CHAT_BODY),
      });
      const text = await res.text();
      assert.equal(res.status, 402, `a deposit below minDeposit ${minDeposit} was taken: ${text.slice(0, 300)}`);
      assert.match(text, /invalid_batch_settlement_evm_deposit_below_min_deposit/);
      assert.match(text, new RegExp(`minimum of ${minDeposit}`));
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      const deposits = await h.gw.services.storage.db.selectFrom('channel_transfers').select(['amount_usdc']).where('kind', '=', 'deposit').execute();
      const row = await channelOf(h, account);
      assert.equal(row, undefined, 'the refused deposit recorded no channel');
      assert.ok(
        deposits.every((d) => Number(d.amount_usdc) >= minDeposit),
        `a deposit below ${minDeposit} was made: ${JSON.stringify(deposits)}`,
      );
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a refund racing a running request: the refund is refused as busy, the request is served and charged, then the refund goes through', async () => {
      const h = harness();
      const { victim, offer, config, channelId } = await refundTarget(h);
      const v = await voucherHeader(h, victim, (ceiling, charged) => charged + ceiling);
      const before = (await channelOf(h, victim))!;
      const refundAt = async () => {
        const charged = (await channelOf(h, victim))!.charged_usdc;
        const voucher = await signVoucher(toClientEvmSigner(victim), channelId, String(charged), offer.network);
        return call(h.gw.url, 'GET', '/v1/channels/refund', undefined, {
          'payment-signature': v2Header(offer, { type: 'refund', channelConfig: config, voucher }),
        });
      };
      h.fake.behaviour = { delayMs: 700 };
      let ran: Awaited<ReturnType<typeof paid>>;
      let raced: Awaited<ReturnType<typeof refundAt>>;
      try {
        const running = paid(h, v.header);
        await new Promise((r) => setTimeout(r, 250));
        raced = await refundAt();
        ran = await running;
      } finally {
        h.fake.behaviour = {};
      }
      assert.equal(ran.status, 200, ran.text);
      assert.notEqual(raced.status, 200, 'the refund did not run beside the request');
      assert.ok(raced.status < 500, raced.text);
      const between = (await channelOf(h, victim))!;
      assert.equal(between.refunded_usdc, before.refunded_usdc);
      const refunded = await refundAt();
      assert.equal(refunded.status, 200, refunded.text);
      const after = (await channelOf(h, victim))!;
      assert.equal(after.refunded_usdc, after.deposited_usdc - after.charged_usdc, 'everything not charged went back, the raced request kept');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('malformed and foreign payloads are 4xx naming the problem, never a 500, and charge nothing', async () => {
      const h = harness();
      const victim = await openedChannel(h);
      const before = (await channelOf(h, victim))!;
      const offer = await usdcEntry(h, CHAT_BODY);
      const usdt = channelOffersOf((await h.chat(CHAT_BODY)).body.accepts).find((o) => o.asset.toLowerCase() !== h.chain.usdc.toLowerCase())!;
      const config = strangersConfig(victim, offer);
      const channelId = computeChannelId(config, offer.network);
      const good = await signVoucher(toClientEvmSigner(victim), channelId, String(before.charged_usdc + Number(offer.amount)), offer.network);
      const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64');
      const withVoucher = (voucher: unknown, over: Record<string, unknown> = {}) =>
        v2Header(offer, { type: 'voucher', channelConfig: config, voucher, ...over });
      const otherChain = computeChannelId(config, 'eip155:1');
      const cases: Record<string, string> = {
        'not base64 JSON': '!!!not-base64',
        'base64 of broken JSON': Buffer.from('{"x402Version":2,').toString('base64'),
        'x402Version 1': b64({ x402Version: 1, accepted: offer, payload: { type: 'voucher', channelConfig: config, voucher: good } }),
        'x402Version 3': b64({ x402Version: 3, accepted: offer, payload: { type: 'voucher', channelConfig: config, voucher: good } }),
        'negative amount': withVoucher({ ...good, maxClaimableAmount: '-1' }),
        'fractional amount': withVoucher({ ...good, maxClaimableAmount: '1.5' }),
        'exponent amount': withVoucher({ ...good, maxClaimableAmount: '1e3' }),
        'amount of 2^128': withVoucher({ ...good, maxClaimableAmount: String(2n ** 128n) }),
        'amount above 2^53': withVoucher({ ...good, maxClaimableAmount: String(2 ** 53 + 2) }),
        'amount as a number': withVoucher({ ...good, maxClaimableAmount: 477 }),
        'signature not hex': withVoucher({ ...good, signature: '0xzz' }),
        'signature of junk bytes': withVoucher({ ...good, signature: `0x${'11'.repeat(65)}` }),
        'withdrawDelay fractional': v2Header(offer, { type: 'voucher', channelConfig: { ...config, withdrawDelay: 900.5 }, voucher: good }),
        'a server-side claim payload': v2Header(offer, { type: 'claim', claims: [] }),
        'voucher for another chain': withVoucher({ ...good, channelId: otherChain }),
        'USDC channel under the USDT entry': v2Header(usdt, { type: 'voucher', channelConfig: config, voucher: good }),
        'accepted.asset not a string': b64({
          x402Version: 2,
          accepted: { ...offer, asset: 7 },
          payload: { type: 'voucher', channelConfig: config, voucher: good },
        }),
        'deposit with a non-integer amount': v2Header(offer, {
          type: 'deposit',
          channelConfig: config,
          voucher: good,
          deposit: { amount: '1.5', authorization: { erc3009Authorization: { validAfter: '0', validBefore: '1', salt: ZERO_SALT, signature: '0x11' } } },
        }),
      };
      const calls = h.fake.received.length;
      const answers: string[] = [];
      for (const [name, header] of Object.entries(cases)) {
        const answer = await paid(h, header);
        answers.push(`${name}: ${answer.status}`);
        assert.ok(answer.status >= 400 && answer.status < 500, `${name}: ${answer.status} ${answer.text.slice(0, 300)}`);
      }
      assert.equal(h.fake.received.length, calls, `nothing ran (${answers.join('; ')})`);
      assert.equal((await channelOf(h, victim))!.charged_usdc, before.charged_usdc);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test("a request arriving after a running stream's lease ran out gets busy and then lets the channel go: the next request is served", async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      await payer.openai.chat.completions.create(CHAT_BODY);
      const row = (await channelOf(h, account))!;
      const db = h.gw.services.storage.db;
      h.fake.behaviour = { content: Array.from({ length: 20 }, (_, i) => `w${i}`).join(' '), chunkDelayMs: 50 };
      try {
        const stream = await payer.openai.chat.completions.create({ ...CHAT_BODY, stream: true });
        let chunks = 0;
        let late: Awaited<ReturnType<typeof paid>> | undefined;
        for await (const _ of stream) {
          if (++chunks !== 3) continue;
          // The running stream's instance missed its renewals (a pause longer than the lease).
          await db.updateTable('channels').set({ lease_until: 1 }).where('channel_id', '=', row.channel_id).execute();
          const v = await voucherHeader(h, account, (ceiling, charged) => charged + ceiling);
          late = await paid(h, v.header);
        }
        assert.equal(late?.status, 402, 'the late request found the stream still running');
      } finally {
        h.fake.behaviour = {};
      }
      const held = (await channelOf(h, account))!;
      const next = await payer.openai.chat.completions
        .create(CHAT_BODY)
        .withResponse()
        .then(
          () => 'served',
          (err: Error) => err.message,
        );
      await assertLedgerConsistent(db);
      assert.equal(next, 'served', `the channel stays held by ${held.lease_owner} until ${held.lease_until} (pending ${held.pending_request})`);
    });
  });
}

/** Waits (bounded) until the channel has no request pending and no lease: the gateway finished the request. */
async function settled(h: PayPerRequestHarness, payer: FundedAccount) {
  for (let i = 0; i < 100; i++) {
    const row = await channelOf(h, payer);
    if (row && row.pending_request === null && row.lease_owner === null) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`the channel is still held: ${JSON.stringify(await channelOf(h, payer))}`);
}
