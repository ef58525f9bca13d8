import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import type { FundedAccount } from '../../../src/devchain/deploy.ts';
import { startTollgateProcess, type GatewayProcess } from '../../support/gateway-process.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';
import { devChain, USD } from '../../support/topup-harness.ts';
import { assertLedgerConsistent } from '../../support/ledger.ts';
import { until } from '../../support/until.ts';
import { settledUpto, UPTO_BODY, uptoOffersOf, uptoOpenAI, uptoPayer } from '../../support/upto-pay-per-request.ts';

/**
 * Pay-per-request upto through a remote facilitator (`tollgate facilitator`, its own process and
 * relayer key): the gateway offers upto bound to the address the facilitator's /supported names,
 * and settles exactly the charge through it.
 */
describe('pay-per-request upto through a remote facilitator', () => {
  let facilitator: GatewayProcess;
  let h: PayPerRequestHarness;
  let relayer: FundedAccount;
  const token = 'test-facilitator-token';
  before(async () => {
    const { anvil, chain } = await devChain();
    relayer = await chain.newAccount();
    const payTo = await chain.newAccount();
    const topup = {
      payTo: payTo.address,
      offers: [{ network: chain.network, asset: chain.usdt, transferMethod: 'permit2', name: 'Tether USD', version: '1', decimals: 6 }],
      facilitator: { type: 'local' },
    };
    facilitator = await startTollgateProcess(
      ['facilitator', '--port', '0'],
      { chains: { [String(anvil.chainId)]: { rpcUrl: anvil.rpcUrl } }, topup },
      {
        TOLLGATE_RELAYER_KEY: relayer.privateKey,
        TOLLGATE_FACILITATOR_TOKEN: token,
      },
    );
    h = await startPayPerRequestHarness('sqlite', {
      config: {
        topup: { payTo: payTo.address, facilitator: { type: 'remote', url: facilitator.url, timeoutSeconds: 5, authTokenEnv: 'FACILITATOR_TOKEN' } },
        payPerRequest: { enabled: true, upto: true },
      },
      env: { FACILITATOR_TOKEN: token },
    });
  });
  after(async () => {
    await h?.gw.assertLedger();
    await h?.stop();
    await facilitator?.stop();
  });

  test("the upto entry binds the remote facilitator's relayer, and exactly the charge settles through it", async () => {
    // /supported is read in the background at start-up: the first 402s may not have it yet.
    let upto: PaymentRequirements | undefined;
    await until(async () => (upto = uptoOffersOf((await h.chat(UPTO_BODY)).body.accepts)[0]) !== undefined, 'the upto offer');
    assert.equal((upto!.extra as { facilitatorAddress: string }).facilitatorAddress.toLowerCase(), relayer.address.toLowerCase());
    const payer = await uptoPayer(h);
    const { response } = await uptoOpenAI(h, payer).chat.completions.create(UPTO_BODY).withResponse();
    const charged = Number(response.headers.get('x-tollgate-charged-usdc'));
    const row = await settledUpto(h, payer);
    assert.equal(row.upto_state, 'settled', row.failure_reason ?? '');
    assert.equal(row.onchain_amount_atomic, String(charged));
    assert.match(row.tx_hash!, /^0x[0-9a-f]{64}$/);
    assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - BigInt(charged));
    await assertLedgerConsistent(h.gw.services.storage.db);
  });
});
