import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { call } from '../../support/gateway.ts';
import { startTollgateProcess, type GatewayProcess } from '../../support/gateway-process.ts';
import { startTopupHarness, USD, type TopupHarness, usdcAuthorization } from '../../support/topup-harness.ts';
import { signEip3009, v2Header } from '../../support/x402-payloads.ts';
import { devChain } from '../../support/topup-harness.ts';
import { assertLedgerAndChainAgree } from '../../support/ledger.ts';
import { x402Client } from '@x402/fetch';
import { UptoEvmScheme } from '@x402/evm/upto/client';
import type { PaymentRequirements } from '@x402/core/types';

/**
 * `tollgate facilitator` as its own process holding the relayer key, and a gateway in remote mode
 * that has no key at all.
 */
describe('remote facilitator: a gateway settling through `tollgate facilitator`', () => {
  let facilitator: GatewayProcess;
  let h: TopupHarness;
  let relayer: FundedAccount;
  const token = 'test-facilitator-token';
  before(async () => {
    const { anvil, chain } = await devChain();
    relayer = await chain.newAccount();
    const payTo = await chain.newAccount();
    const topup = {
      payTo: payTo.address,
      offers: [
        { network: chain.network, asset: chain.usdc, transferMethod: 'eip3009', ...USDC_DOMAIN, decimals: 6 },
        { network: chain.network, asset: chain.usdt, transferMethod: 'permit2', name: 'Tether USD', version: '1', decimals: 6 },
      ],
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
    h = await startTopupHarness('sqlite', {
      payTo,
      facilitator: { type: 'remote', url: facilitator.url, timeoutSeconds: 5, authTokenEnv: 'FACILITATOR_TOKEN' },
      env: { FACILITATOR_TOKEN: token },
    });
  });
  after(async () => {
    await h.stop();
    await facilitator.stop();
  });

  test('USDC and USDT top-ups settle through the remote facilitator', async () => {
    const payer = await h.payer(10n);
    const usdc = await h.topup(payer, 2);
    assert.equal(usdc.status, 200, await usdc.clone().text());
    await h.chain.approvePermit2(payer, h.chain.usdt);
    const usdt = await h.topup(payer, 3, 'permit2');
    assert.equal(usdt.status, 200, await usdt.clone().text());
    assert.equal(await h.balance(payer.address), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, h.payTo.address), 2n * USD);
    assert.equal(await h.chain.balanceOf(h.chain.usdt, h.payTo.address), 3n * USD);
    await h.gw.assertLedger();
  });

  test('the facilitator refuses callers without its token, and payments to another payTo', async () => {
    const supported = await call(facilitator.url, 'GET', '/supported');
    assert.equal(supported.status, 401);
    const withToken = await call(facilitator.url, 'GET', '/supported', undefined, { authorization: `Bearer ${token}` });
    assert.equal(withToken.status, 200);
    assert.ok(withToken.body.kinds.some((k: { network: string }) => k.network === h.chain.network));
    const offer = (await h.post({ amount: 5 })).body.accepts[0];
    const payer = await h.payer(10n);
    const elsewhere = await h.payer(0n);
    const payload = await signEip3009({
      token: h.chain.usdc,
      chainId: h.anvil.chainId,
      domain: USDC_DOMAIN,
      from: payer,
      to: elsewhere.address,
      value: 5n * USD,
    });
    const res = await call(
      facilitator.url,
      'POST',
      '/settle',
      {
        x402Version: 2,
        paymentPayload: { x402Version: 2, accepted: { ...offer, payTo: elsewhere.address }, payload },
        paymentRequirements: { ...offer, payTo: elsewhere.address },
      },
      { authorization: `Bearer ${token}` },
    );
    assert.equal(res.status, 400);
    assert.equal(res.body.errorReason, 'pay_to_not_served');
    assert.equal(await h.chain.balanceOf(h.chain.usdc, elsewhere.address), 0n);
  });

  /** A stock-client upto payment of at most `max` to the facilitator's payTo, bound to the facilitator /supported names. */
  const auth = () => ({ authorization: `Bearer ${token}` });
  async function uptoPayment(max: bigint) {
    const supported = await call(facilitator.url, 'GET', '/supported', undefined, auth());
    const upto = supported.body.kinds.find((k: { scheme: string; network: string }) => k.scheme === 'upto' && k.network === h.chain.network);
    const payer = await h.payer(10n);
    await h.chain.approvePermit2(payer, h.chain.usdt);
    const requirements: PaymentRequirements = {
      scheme: 'upto',
      network: h.chain.network as PaymentRequirements['network'],
      asset: h.chain.usdt,
      amount: max.toString(),
      payTo: h.payTo.address,
      maxTimeoutSeconds: 60,
      extra: { facilitatorAddress: upto.extra.facilitatorAddress, name: 'Tether USD', version: '1' },
    };
    const client = new x402Client().register('eip155:*', new UptoEvmScheme(payer));
    client.setSpendControls({ allowedAssets: [{ network: h.chain.network, asset: h.chain.usdt, maxAmountPerPayment: '10000000000' }] });
    const paymentPayload = await client.createPaymentPayload({
      x402Version: 2,
      resource: { url: 'http://resource.test/', description: 'metered', mimeType: 'application/json' },
      accepts: [requirements],
    });
    return { payer, requirements, paymentPayload, upto };
  }

  test('`tollgate facilitator` settles upto for a resource server: /supported names its relayer as the facilitatorAddress, a stock upto payment verifies at its maximum and settles the lower charge', async () => {
    const { payer, requirements, paymentPayload, upto } = await uptoPayment(2_000_000n);
    assert.ok(upto, 'upto is supported on the dev chain');
    assert.equal(upto.extra.facilitatorAddress.toLowerCase(), relayer.address.toLowerCase());
    const verified = await call(facilitator.url, 'POST', '/verify', { x402Version: 2, paymentPayload, paymentRequirements: requirements }, auth());
    assert.equal(verified.body.isValid, true, JSON.stringify(verified.body));
    const before = await h.chain.balanceOf(h.chain.usdt, h.payTo.address);
    const settled = await call(
      facilitator.url,
      'POST',
      '/settle',
      { x402Version: 2, paymentPayload, paymentRequirements: { ...requirements, amount: '750000' } },
      auth(),
    );
    assert.equal(settled.body.success, true, JSON.stringify(settled.body));
    assert.equal((await h.chain.balanceOf(h.chain.usdt, h.payTo.address)) - before, 750_000n);
    assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD - 750_000n);
  });

  describe('attack: amounts that are not whole numbers, and one payload settled twice at once', () => {
    test('/verify with an amount of "1.5" is refused with 400 invalid_amount naming the field (it was a 500)', async () => {
      const { requirements, paymentPayload } = await uptoPayment(2_000_000n);
      const res = await call(
        facilitator.url,
        'POST',
        '/verify',
        { x402Version: 2, paymentPayload, paymentRequirements: { ...requirements, amount: '1.5' } },
        auth(),
      );
      assert.equal(res.status, 400, res.text);
      assert.equal(res.body.isValid, false);
      assert.equal(res.body.invalidReason, 'invalid_amount');
      assert.match(res.body.invalidMessage, /paymentRequirements\.amount must be a whole number .* not "1\.5"/);
    });

    test('/settle with a blank amount is refused with 400 invalid_amount and nothing is sent (it was a silent success: " " read as 0; "0x10" settled 16)', async () => {
      const { payer, requirements, paymentPayload } = await uptoPayment(2_000_000n);
      const sentBefore = await h.anvil.rpc<string>('eth_getTransactionCount', [relayer.address, 'pending']);
      for (const amount of [' ', '-1', '0x10', '1e6', '12abc']) {
        const res = await call(
          facilitator.url,
          'POST',
          '/settle',
          { x402Version: 2, paymentPayload, paymentRequirements: { ...requirements, amount } },
          auth(),
        );
        assert.equal(res.status, 400, `${JSON.stringify(amount)}: ${res.text}`);
        assert.equal(res.body.success, false);
        assert.equal(res.body.errorReason, 'invalid_amount');
        assert.match(res.body.errorMessage, /paymentRequirements\.amount must be a whole number/);
      }
      assert.equal(await h.anvil.rpc<string>('eth_getTransactionCount', [relayer.address, 'pending']), sentBefore, 'the relayer sent nothing');
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 10n * USD);
    });

    // upto (a resource server's retry) and exact (the facilitator serves gateways' top-ups too).
    const twice = {
      upto: async () => {
        const { payer, requirements, paymentPayload } = await uptoPayment(2_000_000n);
        return {
          payer,
          token: h.chain.usdt,
          amount: 400_000n,
          body: { x402Version: 2, paymentPayload, paymentRequirements: { ...requirements, amount: '400000' } },
        };
      },
      'exact (EIP-3009)': async () => {
        const offer = (await h.post({ amount: 1 })).body.accepts[0];
        const payer = await h.payer(10n);
        const payload = await usdcAuthorization(h, payer, BigInt(offer.amount));
        return {
          payer,
          token: h.chain.usdc,
          amount: BigInt(offer.amount),
          body: { x402Version: 2, paymentPayload: { x402Version: 2, accepted: offer, payload }, paymentRequirements: offer },
        };
      },
    };
    for (const [scheme, payment] of Object.entries(twice))
      test(`${scheme}: the same /settle sent twice at once: both callers get the one settlement, and one transaction is sent`, async () => {
        const { payer, token: asset, amount, body } = await payment();
        const before = await h.chain.balanceOf(asset, h.payTo.address);
        const sentBefore = Number(await h.anvil.rpc<string>('eth_getTransactionCount', [relayer.address, 'pending']));
        const [a, b] = await Promise.all([call(facilitator.url, 'POST', '/settle', body, auth()), call(facilitator.url, 'POST', '/settle', body, auth())]);
        assert.equal(a.body.success, true, a.text);
        assert.equal(b.body.success, true, b.text);
        assert.equal(a.body.transaction, b.body.transaction, 'one transaction for both');
        assert.equal(Number(await h.anvil.rpc<string>('eth_getTransactionCount', [relayer.address, 'pending'])) - sentBefore, 1);
        assert.equal((await h.chain.balanceOf(asset, h.payTo.address)) - before, amount);
        assert.equal(await h.chain.balanceOf(asset, payer.address), 10n * USD - amount);
        await h.gw.assertLedger();
      });
  });

  test('6 wallets paying at once through the one facilitator are all credited', async () => {
    const payers = await h.payers(6, 10n);
    const statuses = await Promise.all(payers.map(async (p) => (await h.topup(p, 1)).status));
    assert.deepEqual(statuses, Array(6).fill(200));
    for (const p of payers) assert.equal(await h.balance(p.address), 1_000_000);
    await assertLedgerAndChainAgree(h.gw.services.storage.db, h.gw.services.topup!.clientFor(h.chain.network)!, 6);
  });

  test("the facilitator's relayer out of gas: 503 with Retry-After, and the same payment is credited once it is refilled", async () => {
    const offer = (await h.post({ amount: 5 })).body.accepts[0];
    const payer = await h.payer(10n);
    const header = v2Header(
      offer,
      await signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value: 5n * USD }),
    );
    const gas = await h.anvil.rpc('eth_getBalance', [relayer.address, 'latest']);
    await h.anvil.rpc('anvil_setBalance', [relayer.address, '0x0']);
    let refused;
    try {
      refused = await h.post({ amount: 5 }, { 'payment-signature': header });
    } finally {
      await h.anvil.rpc('anvil_setBalance', [relayer.address, gas]);
    }
    assert.equal(refused.status, 503, refused.text);
    assert.ok(Number(refused.headers.get('retry-after')) > 0);
    const retry = await h.post({ amount: 5 }, { 'payment-signature': header });
    assert.equal(retry.status, 200, retry.text);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    await h.gw.assertLedger();
  });

  test('facilitator unreachable: 503 FACILITATOR_UNAVAILABLE and nothing credited', async () => {
    const offer = (await h.post({ amount: 5 })).body.accepts[0];
    const payer = await h.payer(10n);
    const payload = await usdcAuthorization(h, payer, 5n * USD);
    await facilitator.stop();
    const res = await h.post({ amount: 5 }, { 'payment-signature': v2Header(offer, payload) });
    assert.equal(res.status, 503, res.text);
    assert.equal(res.body.error, 'FACILITATOR_UNAVAILABLE');
    assert.equal(await h.balance(payer.address), 0);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD);
    assert.equal((await call(h.gw.url, 'GET', '/health')).status, 200);
    await h.gw.assertLedger();
  });
});
