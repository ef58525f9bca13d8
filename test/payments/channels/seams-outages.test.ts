import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { rpcProxy, type RpcProxyState } from '../../support/rpc-proxy.ts';
import { devChain } from '../../support/topup-harness.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { CHANNEL_CONFIG, CHAT_BODY, channelOf, channelOffersOf, channelPayer, openedChannel, paid, voucherHeader } from './channel-harness.ts';

/**
 * The chain unreachable (the gateway's RPC endpoint cut, as a dead node is) while a channel is paid:
 * at a new channel's deposit, at a voucher the gateway must have the facilitator check, and at a
 * deposit sent again. Each is a 503 with nothing recorded, charged or moved, and the same payment
 * is taken once the chain answers again.
 */

const { batchSettlement } = CHANNEL_CONFIG.payPerRequest;

for (const engine of ENGINES) {
  describe(`attack: the chain unreachable while a channel is paid (${engine})`, () => {
    let h: PayPerRequestHarness;
    let proxy: Awaited<ReturnType<typeof rpcProxy>>;
    const rpc: RpcProxyState = { up: true };
    before(async () => {
      const { anvil } = await devChain();
      proxy = await rpcProxy(anvil.rpcUrl, rpc);
      // freshSeconds 1: a voucher after a pause is checked by the facilitator, on chain.
      const config = {
        ...CHANNEL_CONFIG,
        payPerRequest: { ...CHANNEL_CONFIG.payPerRequest, batchSettlement: { ...batchSettlement, freshSeconds: 1 } },
        chains: { [String(anvil.chainId)]: { rpcUrl: proxy.url } },
      };
      h = await startPayPerRequestHarness(engine, { config });
    });
    after(async () => {
      rpc.up = true;
      await h?.gw.assertLedger();
      await h?.stop();
      await proxy?.close();
    });

    /** `send` while the RPC is cut: a 503 that ran nothing; then `send` again once it is back. */
    async function acrossAnOutage(send: () => Promise<Awaited<ReturnType<typeof paid>>>) {
      const calls = h.fake.received.length;
      rpc.up = false;
      let during: Awaited<ReturnType<typeof paid>>;
      try {
        during = await send();
      } finally {
        rpc.up = true;
      }
      assert.equal(during.status, 503, during.text.slice(0, 300));
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      await assertLedgerConsistent(h.gw.services.storage.db);
      const afterwards = await send();
      assert.equal(afterwards.status, 200, afterwards.text.slice(0, 300));
      await assertLedgerConsistent(h.gw.services.storage.db);
    }

    const depositsOf = (channelId: string) =>
      h.gw.services.storage.db
        .selectFrom('channel_transfers')
        .select('amount_usdc')
        .where('channel_id', '=', channelId)
        .where('kind', '=', 'deposit')
        .execute();

    async function depositHeader() {
      const account = await h.payer(10n);
      const offer = channelOffersOf((await h.chat(CHAT_BODY)).body.accepts).find(
        (o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase(),
      ) as PaymentRequirements;
      const { payload } = await channelPayer(h, account).scheme.createPaymentPayload(2, offer);
      return { account, header: v2Header(offer, payload) };
    }

    test("a new channel's deposit while the chain is unreachable: 503, no deposit; the same payment opens the channel once", async () => {
      const { account, header } = await depositHeader();
      await acrossAnOutage(() => paid(h, header));
      const row = (await channelOf(h, account))!;
      assert.equal((await depositsOf(row.channel_id)).length, 1, 'one deposit');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), 9_000_000n, 'the payer paid one deposit');
    });

    test('a voucher the facilitator must check while the chain is unreachable: 503, nothing charged; the same voucher is served after', async () => {
      const payer = await openedChannel(h);
      const v = await voucherHeader(h, payer, (ceiling, charged) => charged + ceiling);
      const before = (await channelOf(h, payer))!;
      await new Promise((r) => setTimeout(r, 1100));
      await acrossAnOutage(async () => {
        const answer = await paid(h, v.header);
        if (answer.status === 503) assert.equal((await channelOf(h, payer))!.charged_usdc, before.charged_usdc, 'nothing charged');
        return answer;
      });
    });

    test('a deposit sent again while the chain is unreachable: 503; once it answers, served on its voucher, one deposit', async () => {
      const { account, header } = await depositHeader();
      h.fake.behaviour = { failStatus: 500 };
      try {
        assert.ok((await paid(h, header)).status >= 500);
      } finally {
        h.fake.behaviour = {};
      }
      await acrossAnOutage(() => paid(h, header));
      const row = (await channelOf(h, account))!;
      assert.equal((await depositsOf(row.channel_id)).length, 1, 'one deposit');
    });
  });
}
