import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { toClientEvmSigner } from '@x402/evm';
import { BatchSettlementEvmScheme } from '@x402/evm/batch-settlement/client';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { serializeErc6492Signature, zeroAddress, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { ENGINES } from '../../support/engines.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import type { PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { USD } from '../../support/topup-harness.ts';
import { CHAT_BODY } from './channel-harness.ts';
import { claimsSuite, reader } from './claims-setup.ts';

/** A contract wallet not deployed yet, holding 10 USDC, whose owner key signs for it wrapped in ERC-6492 (its factory and deploy call). */
async function undeployedWallet(h: PayPerRequestHarness) {
  const owner = privateKeyToAccount(generatePrivateKey());
  const { address, deployCalldata } = await h.chain.smartWallet(owner.address, generatePrivateKey());
  await h.chain.mintUsdc(address, 10n * USD);
  const signTypedData = async (m: unknown) =>
    serializeErc6492Signature({
      address: h.chain.walletFactory,
      data: deployCalldata,
      signature: await owner.signTypedData(m as Parameters<typeof owner.signTypedData>[0]),
    });
  return { address, signer: { address, signTypedData } as Parameters<typeof toClientEvmSigner>[0] };
}

/**
 * An undeployed contract wallet (an ERC-6492 signature) paying on a batch-settlement channel, with
 * no payer authorizer so each voucher is judged by the wallet itself: what happens today, stated.
 * The contract judges a voucher by ERC-1271 on the payer's code, which an undeployed wallet has
 * none of, so no voucher of it could be claimed: the gateway must not serve on it.
 */
for (const engine of ENGINES) {
  describe(`attack: an undeployed (ERC-6492) contract wallet paying on a channel (${engine})`, () => {
    const harness = claimsSuite(engine);

    test('refused today with 402 PAYMENT_REJECTED naming the ERC-6492 factory, before anything runs or moves', async () => {
      const h = harness();
      const wallet = await undeployedWallet(h);
      const scheme = new BatchSettlementEvmScheme(toClientEvmSigner(wallet.signer, reader(h)), { payerAuthorizer: zeroAddress });
      const entry = (_v: number, accepts: PaymentRequirements[]) =>
        accepts.find((r) => r.scheme === 'batch-settlement' && r.asset.toLowerCase() === h.chain.usdc.toLowerCase())!;
      const client = new x402Client(entry).register('eip155:*', scheme);
      client.setSpendControls({ allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '100000000' }] });
      const paying = wrapFetchWithPayment(fetch, client) as typeof fetch;
      const calls = h.fake.received.length;
      let status = 0;
      let text = '';
      try {
        const res = await paying(`${h.gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(CHAT_BODY),
        });
        status = res.status;
        text = await res.text();
      } catch (err) {
        text = `the client threw: ${(err as Error).message}`;
      }
      // Today: the facilitator's deposit check refuses the ERC-6492 signature (its wallet factory is not one it
      // allows), so a 402 names the reason and the client's channel is never opened. No 6492 support is built here.
      assert.equal(status, 402, text.slice(0, 400));
      const body = JSON.parse(text) as { error: string; reason: string; message: string };
      assert.equal(body.error, 'PAYMENT_REJECTED');
      assert.match(body.reason, /^invalid_batch_settlement_evm_eip6492_factory_not_allowed/);
      assert.match(body.message, /nothing was charged and nothing moved/);
      assert.equal(h.fake.received.length, calls, 'nothing ran');
      assert.equal(await h.chain.balanceOf(h.chain.usdc, wallet.address), 10n * USD, "the wallet's tokens did not move");
      assert.equal(await reader(h).getCode({ address: wallet.address as Hex }), undefined, 'the wallet is still not deployed');
      await assertLedgerConsistent(h.gw.services.storage.db);
    });
  });
}
