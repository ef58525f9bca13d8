import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { wrapFetchWithPayment } from '@x402/fetch';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { sseBlocks } from '../../support/sse.ts';
import { USD } from '../../support/topup-harness.ts';
import { holdBalance, settledUpto, uptoClient, uptoPayer, uptoSuite } from '../../support/upto-pay-per-request.ts';
import { CHAT_BODY, channelOf, channelPayer, channelSuite, openedChannel } from '../channels/channel-harness.ts';

/** payPerRequest.minUsd's default: every request below 1 cent is offered at 1 cent. */
const CENT = 10_000;
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100, stream: true };
/** How long the provider waits before its first byte: the window in which the paying client must already have its 200. */
const FIRST_BYTE_DELAY_MS = 1000;

/**
 * The spec's stream contract (4.7) for a caller without a key, under each payment scheme: the
 * payment is verified (and an exact one settled, a channel's deposit made) before the headers, and
 * the headers before the provider is called; a provider that then breaks off mid-answer ends the
 * stream with `{"error":{"message","type":"upstream_error"}}` and `[DONE]`, nothing after it, and
 * none of the payment is charged: exact stays credited to the balance, upto settles 0, a channel's
 * charged amount does not move (its voucher pays for the next request).
 */

/** The provider answers late, then breaks off after three words; `answered()` says whether it wrote its first event yet. */
function slowThenCut(h: PayPerRequestHarness): { answered: () => boolean } {
  let answered = false;
  h.fake.behaviour = {
    delayMs: FIRST_BYTE_DELAY_MS,
    cutAfterChunks: 3,
    rewriteChunk: (json) => {
      answered = true;
      return json;
    },
  };
  return { answered: () => answered };
}

/** The paid stream through `paying`: its 200 arrives before the provider's first event, and the stream ends with the spec's error event. */
async function streamBrokenOff(h: PayPerRequestHarness, paying: typeof fetch): Promise<Response> {
  const provider = slowThenCut(h);
  try {
    const res = await paying(`${h.gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(BODY),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.equal(provider.answered(), false, 'the paying client had its 200 before the provider wrote a byte (spec 4.7 rule 3)');
    const blocks = sseBlocks(await res.text());
    assert.ok(provider.answered());
    assert.ok(blocks.length > 2, 'part of the answer reached the client');
    assert.equal(blocks.at(-1), 'data: [DONE]', 'nothing follows [DONE]');
    const error = JSON.parse(blocks.at(-2)!.replace(/^data: /, '')).error;
    assert.deepEqual(Object.keys(error).sort(), ['message', 'type']);
    assert.equal(error.type, 'upstream_error');
    assert.match(error.message, /closed the connection.*; nothing was charged$/);
    return res;
  } finally {
    h.fake.behaviour = {};
  }
}

for (const engine of ENGINES) {
  describe(`pay-per-request streams keep the spec's order and money, exact and upto (${engine})`, () => {
    const harness = uptoSuite(engine);

    test('exact: settled before the 200 (its receipt among the headers), the provider breaking off mid-answer: credited, nothing charged', async () => {
      const h = harness();
      const payer = await h.payer(10n);
      const res = await streamBrokenOff(h, h.payingFetch(payer) as typeof fetch);
      assert.equal(decodePaymentResponseHeader(res.headers.get('payment-response')!).success, true);
      const wallet = payer.address.toLowerCase();
      const db = h.gw.services.storage.db;
      const payments = await db.selectFrom('payments').selectAll().where('payer', '=', wallet).execute();
      assert.deepEqual(
        payments.map((p) => [p.status, Number(p.amount_usdc)]),
        [['credited', CENT]],
      );
      const usage = await db.selectFrom('request_usage').selectAll().where('wallet', '=', wallet).execute();
      assert.deepEqual(
        usage.map((u) => [u.status, Number(u.charged_usdc)]),
        [['upstream_error', 0]],
      );
      assert.equal(await h.balance(payer.address), CENT, 'the whole payment stays in the balance');
      await assertLedgerConsistent(db);
    });

    test('upto: verified before the 200, the provider breaking off mid-answer: settled 0, no transaction, the hold empty', async () => {
      const h = harness();
      const payer = await uptoPayer(h);
      await streamBrokenOff(h, wrapFetchWithPayment(fetch, uptoClient(h, payer)) as typeof fetch);
      const row = await settledUpto(h, payer);
      assert.deepEqual([row.upto_state, row.settle_amount_atomic, row.tx_hash], ['settled', '0', null]);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD, 'nothing left the payer');
      assert.deepEqual(await holdBalance(h, payer), { balance_usdc: 0, locked_usdc: 0, available_usdc: 0 });
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });

  describe(`pay-per-request streams keep the spec's order and money, batch-settlement (${engine})`, () => {
    const harness = channelSuite(engine);

    test("a channel's voucher: checked before the 200, the provider breaking off mid-answer: the channel charged nothing, its next request served", async () => {
      const h = harness();
      const account = await openedChannel(h);
      const before = (await channelOf(h, account))!;
      const payer = channelPayer(h, account);
      await streamBrokenOff(h, payer.fetch);
      const after = (await channelOf(h, account))!;
      assert.equal(after.charged_usdc, before.charged_usdc, 'the broken stream charged the channel nothing');
      assert.equal(after.pending_request, null, 'the channel was let go');
      const usage = await h.gw.services.storage.db.selectFrom('request_usage').selectAll().where('wallet', '=', `${before.channel_id}#channel`).execute();
      assert.deepEqual(
        usage.map((u) => [u.status, Number(u.charged_usdc) > 0]),
        [
          ['ok', true],
          ['upstream_error', false],
        ],
      );
      await assertLedgerConsistent(h.gw.services.storage.db);
      const next = await payer.openai.chat.completions.create(CHAT_BODY);
      assert.ok(next.choices[0]);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
