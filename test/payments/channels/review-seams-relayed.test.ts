import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type Abi, encodeAbiParameters, type Hex } from 'viem';
import artifacts from '../../../src/devchain/artifacts.json' with { type: 'json' };
import { BATCH_SETTLEMENT_ADDRESS, ERC3009_DEPOSIT_COLLECTOR_ADDRESS } from '../../../src/devchain/deploy.ts';
import { readOnchainChannel } from '../../../src/payments/channels/onchain-channel.ts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { v2Header } from '../../support/x402-payloads.ts';
import { channelOf, channelPayer, channelSuite, paid } from './channel-harness.ts';
import { reader } from './claims-setup.ts';
import { type DepositPayload, usdcChannelOffer } from './review-seams-setup.ts';

/**
 * A deposit payload whose deposit someone else relayed to the contract (anyone who saw the payload
 * in flight can: the EIP-3009 authorization names the collector, not who submits it) before the
 * gateway ever saw the channel. deposit-landed.ts says such a payload is its voucher; the
 * channel's first payment goes to the facilitator's verify first, which refuses a used authorization.
 */

for (const engine of ENGINES) {
  describe(`attack: a deposit relayed to the contract before the gateway saw its channel (${engine})`, () => {
    const harness = channelSuite(engine);

    test("the payer's deposit payload, its deposit relayed by a stranger first, is served on its voucher with no second deposit", async () => {
      const h = harness();
      const account = await h.payer(10n);
      const stranger = await h.payer(0n);
      const offer = await usdcChannelOffer(h);
      const deposit = (await channelPayer(h, account).scheme.createPaymentPayload(2, offer)).payload as unknown as DepositPayload;
      const auth = deposit.deposit.authorization.erc3009Authorization as { validAfter: string; validBefore: string; salt: string; signature: Hex };
      const collectorData = encodeAbiParameters(
        [{ type: 'uint256' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'bytes' }],
        [BigInt(auth.validAfter), BigInt(auth.validBefore), BigInt(auth.salt), auth.signature],
      );
      const relay = h.chain.client(stranger);
      const hash = await relay.writeContract({
        address: BATCH_SETTLEMENT_ADDRESS,
        abi: artifacts.StandInBatchSettlement.abi as Abi,
        functionName: 'deposit',
        args: [deposit.channelConfig, BigInt(deposit.deposit.amount), ERC3009_DEPOSIT_COLLECTOR_ADDRESS, collectorData],
      });
      assert.equal((await relay.waitForTransactionReceipt({ hash })).status, 'success', 'the stranger relayed the deposit');
      const channelId = deposit.voucher.channelId;
      assert.equal((await readOnchainChannel(reader(h), channelId)).balance, BigInt(deposit.deposit.amount));
      const answer = await paid(h, v2Header(offer, deposit));
      await assertLedgerConsistent(h.gw.services.storage.db);
      assert.equal(answer.status, 200, `${answer.status} ${answer.body.error} ${answer.body.reason ?? answer.body.message}`);
      const row = (await channelOf(h, account))!;
      assert.equal(row.balance_usdc, Number(deposit.deposit.amount), "the mirror is the contract's balance");
      assert.equal(await h.chain.balanceOf(h.chain.usdc, account.address), 10_000_000n - BigInt(deposit.deposit.amount), 'one deposit paid');
    });
  });
}
