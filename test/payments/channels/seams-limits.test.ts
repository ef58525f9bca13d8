import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { CHAT_BODY, channelOf, channelPayer, channelSuite, openedChannel, paid, voucherHeader } from './channel-harness.ts';

/**
 * Channels against the per-wallet chat rate limit (rateLimits.chat, the window a wallet's API keys
 * share): a channel request over it is the spec's 429 with the X-RateLimit-* headers, charges
 * nothing, moves no money and lets the channel go, so the same payment is taken once the window allows.
 */

const PER_MINUTE = 3;

/** The gateway's clock, moved forward by the tests (the in-process limiter counts with it). */
function movableClock(h: PayPerRequestHarness) {
  const services = h.gw.services as { now: () => number };
  const real = services.now;
  let skew = 0;
  services.now = () => real() + skew;
  return { pastTheWindow: () => void (skew += 61_000) };
}

/** Uses up `payer`'s chat window, as its API keys' requests would. */
async function fillWindow(h: PayPerRequestHarness, payer: FundedAccount) {
  const { limiter, rateWindows, now } = h.gw.services;
  while ((await limiter.hit(`chat:${payer.address.toLowerCase()}`, rateWindows.chat, now())).allowed);
}

function assertRateLimited(answer: { status: number; headers: Headers; text: string }) {
  assert.equal(answer.status, 429, answer.text.slice(0, 300));
  assert.match(answer.text, /RATE_LIMITED/);
  assert.equal(answer.headers.get('x-ratelimit-limit'), String(PER_MINUTE));
  assert.equal(answer.headers.get('x-ratelimit-remaining'), '0');
  assert.match(answer.headers.get('x-ratelimit-reset') ?? '', /^\d+$/);
  assert.ok(Number(answer.headers.get('retry-after')) >= 1, 'retry-after names when to come back');
}

const deposits = (h: PayPerRequestHarness, channelId: string) =>
  h.gw.services.storage.db.selectFrom('channel_transfers').select('amount_usdc').where('channel_id', '=', channelId).where('kind', '=', 'deposit').execute();

for (const engine of ENGINES) {
  describe(`attack: batch-settlement channels over the per-wallet rate limit (${engine})`, () => {
    const harness = channelSuite(engine, { rateLimits: { chat: { perMinute: PER_MINUTE, perDay: 1000 } } });

    test("a voucher over the payer's window is a 429: nothing charged, the channel let go, the voucher taken after the window", async () => {
      const h = harness();
      const clock = movableClock(h);
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      const before = (await channelOf(h, payer))!;
      await fillWindow(h, payer);
      const calls = h.fake.received.length;
      assertRateLimited(await paid(h, v.header));
      assert.equal(h.fake.received.length, calls, 'the provider was never called');
      const between = (await channelOf(h, payer))!;
      assert.equal(between.charged_usdc, before.charged_usdc, 'nothing charged');
      assert.equal(between.signed_max_usdc, before.signed_max_usdc, 'the voucher was not adopted');
      assert.equal(between.lease_owner, null, "the channel's lease was let go");
      assert.equal(between.pending_request, null);
      await assertLedgerConsistent(h.gw.services.storage.db);
      clock.pastTheWindow();
      const served = await paid(h, v.header);
      assert.equal(served.status, 200, served.text);
      const after = (await channelOf(h, payer))!;
      assert.equal(after.charged_usdc, before.charged_usdc + Number(served.headers.get('x-tollgate-charged-usdc')));
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('a first deposit over the window is a 429 before the deposit is made; the stock client opens the channel after it', async () => {
      const h = harness();
      const clock = movableClock(h);
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      const onChain = await h.chain.balanceOf(h.chain.usdc, account.address);
      await fillWindow(h, account);
      const send = () =>
        payer.fetch(`${h.gw.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(CHAT_BODY) });
      const refused = await send();
      assertRateLimited({ status: refused.status, headers: refused.headers, text: await refused.text() });
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), onChain, "the payer's tokens did not move");
      const row = await channelOf(h, account);
      if (row) assert.deepEqual(await deposits(h, row.channel_id), [], 'no deposit recorded');
      await assertLedgerConsistent(h.gw.services.storage.db);
      clock.pastTheWindow();
      const served = await send();
      assert.equal(served.status, 200, await served.text());
      const opened = (await channelOf(h, account))!;
      assert.equal((await deposits(h, opened.channel_id)).length, 1, 'one deposit');
      assert.equal(opened.lease_owner, null);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
