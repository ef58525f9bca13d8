import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Abi } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { BATCH_SETTLEMENT_ADDRESS } from '../../../src/devchain/deploy.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { CHAT_BODY, channelOf, channelOffersOf, channelPayer, channelSuite } from './channel-harness.ts';

/**
 * A fresh reviewer's attack: the payer's timed withdrawal started on chain mid-session. Its own file,
 * because it moves the chain's clock (every EIP-3009 authorization of a file sharing the chain would
 * be past its validBefore).
 */
const abi = artifacts.StandInBatchSettlement.abi as Abi;

for (const engine of ENGINES) {
  describe(`attack: a timed withdrawal started mid-session (${engine})`, () => {
    const harness = channelSuite(engine);

    test('a voucher sent seconds before the payer can finalize its withdrawal is not served (its charge could never be claimed)', async (t) => {
      const h = harness();
      // The chain's clock goes back after the test: the other engine's run shares this chain, and
      // the stock client's EIP-3009 deposits are valid until a wall-clock time.
      const snapshot = await h.anvil.rpc<string>('evm_snapshot');
      t.after(async () => {
        await h.anvil.rpc('evm_revert', [snapshot]);
        await h.anvil.rpc('evm_setTime', [Math.floor(Date.now() / 1000)]);
      });
      const account = await h.payer(10n);
      const payer = channelPayer(h, account);
      await payer.openai.chat.completions.create(CHAT_BODY);
      const asked = await h.chat(CHAT_BODY);
      const offer = channelOffersOf(asked.body.accepts).find((o) => o.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
      const config = payer.scheme.buildChannelConfig(offer);
      const opened = (await channelOf(h, account))!;
      const wallet = h.chain.client(account);
      const send = async (functionName: string, args: unknown[]) =>
        wallet.waitForTransactionReceipt({ hash: await wallet.writeContract({ address: BATCH_SETTLEMENT_ADDRESS, abi, functionName, args }) });
      await send('initiateWithdraw', [config, BigInt(opened.balance_usdc - opened.total_claimed_usdc)]);
      await h.anvil.rpc('evm_increaseTime', [(offer.extra as { withdrawDelay: number }).withdrawDelay - 5]);
      await h.anvil.rpc('evm_mine');
      // The gateway's clock moved as the chain's did: its mirror is stale, so the facilitator is asked.
      await h.gw.services.storage.db.updateTable('channels').set({ synced_at: 0 }).where('channel_id', '=', opened.channel_id).execute();
      const late = await payer.openai.chat.completions
        .create(CHAT_BODY)
        .withResponse()
        .then(
          () => 'served',
          (err: Error) => err.message,
        );
      await h.anvil.rpc('evm_increaseTime', [10]);
      await h.anvil.rpc('evm_mine');
      await send('finalizeWithdraw', [config]);
      const row = (await channelOf(h, account))!;
      await assertLedgerConsistent(h.gw.services.storage.db);
      assert.notEqual(
        late,
        'served',
        `served 5 s before the withdrawal's deadline; after finalizeWithdraw the gateway has charged ${row.charged_usdc} ` +
          `(claimed ${row.total_claimed_usdc}, mirrored withdrawRequestedAt ${row.withdraw_requested_at}) and ledger-check passes`,
      );
      assert.match(late, /^402 /, 'refused with a 402 (the channel is closing), not an error');
    });
  });
}
