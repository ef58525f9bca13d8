import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodePaymentResponseHeader } from '@x402/core/http';
import { MODELS } from '../../support/chat-harness.ts';
import { EMBEDDING_MODEL, EMBED_ID } from '../../support/embeddings-harness.ts';
import { ENGINES } from '../../support/engines.ts';
import type { PublicClient } from 'viem';
import { auditCreditsOnChain } from '../../../src/payments/audit.ts';
import { assertLedgerAndChainAgree, assertLedgerConsistent } from '../../support/ledger.ts';
import { USD } from '../../support/topup-harness.ts';
import { CHAT_BODY, channelCharges, channelOf, channelOffersOf, channelPayer, channelSuite } from './channel-harness.ts';

/**
 * An agent's session with the stock client: one deposit, then twenty requests (JSON and streamed
 * chat, embeddings) each charged exactly its bill out of the channel, with no transaction per
 * request, and the ledger consistent after every step.
 */
for (const engine of ENGINES) {
  describe(`batch-settlement session with the stock @x402/fetch client (${engine})`, () => {
    const harness = channelSuite(engine, { models: [...MODELS, EMBEDDING_MODEL] });

    test('the 402 offers batch-settlement beside exact: the reservation as amount, the channel parameters in extra', async () => {
      const h = harness();
      const asked = await h.chat(CHAT_BODY);
      assert.equal(asked.status, 402);
      const entries = channelOffersOf(asked.body.accepts);
      assert.equal(entries.length, 2, 'one per 6-decimal offer (USDC by EIP-3009, USDT by Permit2)');
      const usdc = entries.find((e) => e.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
      assert.equal(usdc.amount, String(asked.body.reserved_usdc), 'the amount is the reservation: the ceiling a voucher adds');
      assert.equal(usdc.payTo.toLowerCase(), h.payTo.address.toLowerCase());
      const extra = usdc.extra as Record<string, unknown>;
      assert.equal(extra.withdrawDelay, 900);
      assert.equal(extra.minDeposit, '1000000');
      assert.equal(extra.assetTransferMethod, 'eip3009');
      assert.match(String(extra.receiverAuthorizer), /^0x[0-9a-fA-F]{40}$/);
      assert.ok(
        asked.body.accepts.some((a: { scheme: string }) => a.scheme === 'exact'),
        'exact is still offered',
      );
    });

    test('a session of twenty requests: one deposit on chain, each request charged exactly its bill, ledger-check clean throughout', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      const charges: number[] = [];
      for (let i = 0; i < 20; i++) {
        const kind = i % 4;
        if (kind === 3) {
          const { data, response } = await payer.openai.embeddings.create({ model: EMBED_ID, input: [`input ${i}`] }).withResponse();
          assert.equal(data.data.length, 1);
          charges.push(Number(response.headers.get('x-tollgate-charged-usdc')));
          const receipt = decodePaymentResponseHeader(response.headers.get('payment-response')!);
          assert.equal((receipt.extra as { chargedAmount?: string }).chargedAmount, String(charges.at(-1)));
        } else if (kind === 2) {
          const stream = await payer.openai.chat.completions.create({ ...CHAT_BODY, stream: true, stream_options: { include_usage: true } });
          let usage: { charged_usdc?: number } | undefined;
          for await (const chunk of stream) usage = (chunk.usage as { charged_usdc?: number } | undefined) ?? usage;
          assert.ok(usage?.charged_usdc, 'the stream states its charge in its usage');
          charges.push(usage.charged_usdc);
        } else {
          const { data, response } = await payer.openai.chat.completions
            .create({ ...CHAT_BODY, messages: [{ role: 'user', content: `request ${i}` }] })
            .withResponse();
          assert.match(data.choices[0]!.message.content!, /fake provider/);
          const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
          charges.push(charged);
          const receipt = decodePaymentResponseHeader(response.headers.get('payment-response')!);
          assert.equal(receipt.success, true);
          assert.equal((receipt.extra as { chargedAmount?: string }).chargedAmount, String(charged));
          const state = (receipt.extra as { channelState: { chargedCumulativeAmount: string } }).channelState;
          assert.equal(state.chargedCumulativeAmount, String(charges.reduce((a, b) => a + b, 0)));
        }
        await assertLedgerConsistent(h.gw.services.storage.db);
      }
      const channel = (await channelOf(h, account))!;
      assert.deepEqual(await channelCharges(h, channel.channel_id), charges, 'each request was billed once, its own charge');
      assert.equal(
        channel.charged_usdc,
        charges.reduce((a, b) => a + b, 0),
      );
      assert.ok(charges.every((c) => c > 0));
      assert.ok(channel.signed_max_usdc! >= channel.charged_usdc);
      assert.equal(channel.deposited_usdc, 1_000_000, 'one deposit of extra.minDeposit');
      const deposits = await h.gw.services.storage.db.selectFrom('channel_transfers').selectAll().where('channel_id', '=', channel.channel_id).execute();
      assert.equal(deposits.length, 1, 'one transaction for the whole session');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), 10n * USD - 1_000_000n, 'the deposit left the wallet; nothing else did');
      assert.equal(await h.balance(account.address), 0, 'nothing was credited to the payer: a channel is escrow, not a balance');
      await assertLedgerConsistent(h.gw.services.storage.db);

      // The cooperative refund: what was charged is claimed, the rest goes back to the wallet.
      const refunded = await payer.scheme.refund(`${h.gw.url}/v1/channels/refund`);
      assert.equal(refunded.success, true);
      const total = charges.reduce((a, b) => a + b, 0);
      assert.equal(refunded.amount, String(1_000_000 - total));
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), 10n * USD - BigInt(total), 'the wallet paid exactly its charges');
      const after = (await channelOf(h, account))!;
      assert.equal(after.total_claimed_usdc, total, 'everything charged was claimed with the refund');
      assert.equal(after.refunded_usdc, 1_000_000 - total);
      // ledger-check --chain: the mirror of the channel is what the contract holds.
      await assertLedgerAndChainAgree(h.gw.services.storage.db, h.chain.client(account) as unknown as PublicClient, 1);
      const db = h.gw.services.storage.db;
      await db
        .updateTable('channels')
        .set({ total_claimed_usdc: total - 1 })
        .where('channel_id', '=', after.channel_id)
        .execute();
      const audit = await auditCreditsOnChain(db, () => h.chain.client(account) as unknown as PublicClient);
      assert.deepEqual(audit.problems, [`channel ${after.channel_id}: ${total} claimed on chain, ${total - 1} mirrored`], 'a mirror that differs is named');
      await db.updateTable('channels').set({ total_claimed_usdc: total }).where('channel_id', '=', after.channel_id).execute();
    });
  });
}
