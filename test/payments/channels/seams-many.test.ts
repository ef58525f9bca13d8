import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { CHANNEL_CONFIG, CHAT_BODY, channelCharges, channelOf, channelPayer, channelSuite } from './channel-harness.ts';
import { reader } from './claims-setup.ts';

/**
 * Channels under honest load: a channel topped up again and again by the stock client (each top-up
 * a deposit payload on a channel the gateway knows), and many payers opening channels and paying at
 * once (every deposit a transaction of the one relayer). Every request is served, every deposit
 * made once, and the contract holds what the gateway recorded.
 */

const { batchSettlement } = CHANNEL_CONFIG.payPerRequest;
/** A deposit of 2 cents: a few requests of 4,000 output tokens each use it up. */
const SMALL_DEPOSITS = { payPerRequest: { ...CHANNEL_CONFIG.payPerRequest, batchSettlement: { ...batchSettlement, minDepositUsd: 0.02 } } };
const LONG = { ...CHAT_BODY, max_tokens: 4000 };

async function depositsOf(h: PayPerRequestHarness, channelId: string) {
  const rows = await h.gw.services.storage.db
    .selectFrom('channel_transfers')
    .select(['amount_usdc', 'tx_hash'])
    .where('channel_id', '=', channelId)
    .where('kind', '=', 'deposit')
    .execute();
  return rows.map((r) => ({ amount: Number(r.amount_usdc), tx: r.tx_hash }));
}

/** The contract holds exactly the channel's recorded deposits, each a distinct transaction, and the charges are the usage's. */
async function assertChannelHolds(h: PayPerRequestHarness, channelId: string) {
  const deposits = await depositsOf(h, channelId);
  assert.equal(new Set(deposits.map((d) => d.tx)).size, deposits.length, 'each deposit its own transaction');
  const onChain = await readOnchainChannel(reader(h), channelId as `0x${string}`);
  assert.equal(onChain.balance, BigInt(deposits.reduce((a, d) => a + d.amount, 0)), 'the contract holds what was deposited');
  const row = (await h.gw.services.storage.db.selectFrom('channels').selectAll().where('channel_id', '=', channelId).executeTakeFirstOrThrow())!;
  assert.equal(
    Number(row.charged_usdc),
    (await channelCharges(h, channelId)).reduce((a, b) => a + b, 0),
  );
  return deposits;
}

for (const engine of ENGINES) {
  describe(`batch-settlement channels under honest load (${engine})`, () => {
    const harness = channelSuite(engine, SMALL_DEPOSITS);

    test('the stock client topping its channel up again and again: every request served, each top-up a deposit made once', async () => {
      const h = harness();
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      // Each answer uses nearly all its 4,000 tokens: a 2-cent deposit covers two requests.
      h.fake.behaviour = { usage: { prompt_tokens: 10, completion_tokens: 3900 } };
      try {
        for (let i = 0; i < 6; i++) {
          const { data } = await payer.openai.chat.completions.create(LONG).withResponse();
          assert.ok(data.choices[0]);
        }
      } finally {
        h.fake.behaviour = {};
      }
      const row = (await channelOf(h, account))!;
      const deposits = await assertChannelHolds(h, row.channel_id);
      assert.ok(deposits.length >= 2, `the channel was topped up (${deposits.length} deposits)`);
      await assertLedgerConsistent(h.gw.services.storage.db);
    });

    test('eight payers opening channels and paying at the same time: all served, one relayer, every deposit once', async () => {
      const h = harness();
      const accounts = await h.payers(8, 10n);
      const session = async (account: (typeof accounts)[number]) => {
        const payer = channelPayer(h, account);
        for (let i = 0; i < 3; i++) await payer.openai.chat.completions.create(CHAT_BODY);
      };
      const results = await Promise.allSettled(accounts.map(session));
      const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [`payer ${i}: ${(r.reason as Error).message}`] : []));
      assert.deepEqual(failed, []);
      for (const account of accounts) {
        const row = (await channelOf(h, account))!;
        assert.equal((await assertChannelHolds(h, row.channel_id)).length, 1);
        assert.equal((await channelCharges(h, row.channel_id)).length, 3);
      }
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
