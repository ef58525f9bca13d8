import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { USDC_DOMAIN, type FundedAccount } from '../../src/devchain/deploy.ts';
import { GatewayClient } from '../../src/gateway-client/gateway-client.ts';
import { topUp } from '../../src/gateway-client/topup-client.ts';
import { ENGINES } from '../support/engines.ts';
import { startTopupHarness, USD, type TopupHarness } from '../support/topup-harness.ts';
import { base64Json, signEip3009, signPermit2, v1Header } from '../support/x402-payloads.ts';
import { V1_BODY } from '../support/x402-v1-clients.ts';

/**
 * Attacks on topup.x402v1Body. Every money test checks the chain, the
 * ledger balance and the payment rows; the ledger invariants are asserted after each describe.
 */
const nowS = () => BigInt(Math.floor(Date.now() / 1000));

for (const engine of ENGINES) {
  describe(`attack: x402 v1 top-up payments, held defences (${engine})`, () => {
    let h: TopupHarness;
    before(async () => {
      h = await startTopupHarness(engine, { config: V1_BODY });
    });
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });

    const rowsOf = (payer: FundedAccount) =>
      h.gw.services.storage.db.selectFrom('payments').selectAll().where('payer', '=', payer.address.toLowerCase()).execute();
    const usdc = (payer: FundedAccount, value: bigint) =>
      signEip3009({ token: h.chain.usdc, chainId: h.anvil.chainId, domain: USDC_DOMAIN, from: payer, to: h.payTo.address, value, validAfter: nowS() - 600n });

    test('v1 and v2 headers sent together with two different payments: only PAYMENT-SIGNATURE is taken; each authorization credited at most once', async () => {
      const payer = await h.payer(10n);
      const a = await usdc(payer, 2n * USD);
      const b = await usdc(payer, 2n * USD);
      const offered = decodePaymentRequiredHeader((await h.post({ amount: 2 })).headers.get('payment-required')!).accepts[0]!;
      const both = await h.post(
        { amount: 2 },
        { 'x-payment': v1Header('base-sepolia', a), 'payment-signature': base64Json({ x402Version: 2, accepted: offered, payload: b }) },
      );
      assert.equal(both.status, 200, both.text);
      assert.equal(await h.balance(payer.address), 2_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 8n * USD);
      // Replaying b in v1 form: the same payment, no second credit.
      const again = await h.post({ amount: 2 }, { 'x-payment': v1Header('base-sepolia', b) });
      assert.equal(again.status, 200, again.text);
      assert.equal(await h.balance(payer.address), 2_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 8n * USD);
      assert.equal((await rowsOf(payer)).length, 1);
    });

    test('v1 → v2 → v1 replays of one authorization, all at once, twice over: one transfer, one credit', async () => {
      const payer = await h.payer(10n);
      const p = await usdc(payer, 3n * USD);
      const offered = decodePaymentRequiredHeader((await h.post({ amount: 3 })).headers.get('payment-required')!).accepts[0]!;
      const v1 = { 'x-payment': v1Header('base-sepolia', p) };
      const v1Caip = { 'x-payment': v1Header('eip155:84532', p) };
      const v2 = { 'payment-signature': base64Json({ x402Version: 2, accepted: offered, payload: p }) };
      const v2InXPayment = { 'x-payment': base64Json({ x402Version: 2, accepted: offered, payload: p }) };
      const results = await Promise.all([v1, v2, v1Caip, v2InXPayment, v1, v2].map((hd) => h.post({ amount: 3 }, hd)));
      for (const r of results) assert.ok([200, 202, 503].includes(r.status), `${r.status} ${r.text}`);
      assert.ok(results.some((r) => r.status === 200));
      assert.equal(await h.balance(payer.address), 3_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 7n * USD);
      assert.equal((await rowsOf(payer)).length, 1);
    });

    test('v1 scheme other than exact, an unknown or wider-table name (ethereum, celo, monad), mixed case: 400 before anything is recorded', async () => {
      const payer = await h.payer(5n);
      const p = await usdc(payer, USD);
      for (const scheme of ['upto', 'EXACT', 'exact ']) {
        const res = await h.post({ amount: 1 }, { 'x-payment': base64Json({ x402Version: 1, scheme, network: 'base-sepolia', payload: p }) });
        assert.equal(res.status, 400, `${scheme}: ${res.text}`);
      }
      for (const network of ['ethereum', 'celo', 'monad', 'flare', 'Base-Sepolia', 'eip155:084532', 'eip155:84532 ', 'hasOwnProperty']) {
        const res = await h.post({ amount: 1 }, { 'x-payment': v1Header(network, p) });
        assert.equal(res.status, 400, `${network}: ${res.text}`);
      }
      assert.equal((await rowsOf(payer)).length, 0);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 5n * USD);
    });

    test('a v1 Permit2 payment (USDT) names no asset in its envelope: matched by the permitted token, credited its own amount once', async () => {
      const payer = await h.payer(10n);
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const p = await signPermit2({ token: h.chain.usdt, chainId: h.anvil.chainId, from: payer, to: h.payTo.address, amount: 4n * USD });
      const res = await h.post({ amount: 4 }, { 'x-payment': v1Header('base-sepolia', p) });
      assert.equal(res.status, 200, res.text);
      // The same permit claimed for USDC's offer (a token it does not name): refused.
      const asUsdc = { ...p, permit2Authorization: { ...p.permit2Authorization, permitted: { token: h.chain.usdc, amount: String(4n * USD) } } };
      const forged = await h.post({ amount: 4 }, { 'x-payment': v1Header('base-sepolia', asUsdc) });
      assert.equal(forged.status, 400, forged.text);
      assert.equal(await h.balance(payer.address), 4_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 6n * USD);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 10n * USD);
    });

    test('maxAmountRequired is never read from the client: a v1 envelope carrying its own maxAmountRequired/asset/payTo for $100 credits what was signed ($1) or nothing', async () => {
      const payer = await h.payer(5n);
      const p = await usdc(payer, USD);
      const lying = base64Json({
        x402Version: 1,
        scheme: 'exact',
        network: 'base-sepolia',
        maxAmountRequired: String(100n * USD),
        asset: h.chain.usdt,
        payTo: payer.address,
        payload: p,
      });
      const big = await h.post({ amount: 100 }, { 'x-payment': lying });
      assert.equal(big.status, 400, big.text);
      const right = await h.post({ amount: 1 }, { 'x-payment': lying });
      assert.equal(right.status, 200, right.text);
      assert.equal(right.body.credited_usdc, 1_000_000);
      assert.equal(await h.balance(payer.address), 1_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 4n * USD);
    });
  });
}

describe('attack: the flag turned off between the 402 and the payment (sqlite)', () => {
  test('a v1 payment built from a v1 body is still matched, settled and credited once by a gateway restarted without the flag', async () => {
    const on = await startTopupHarness('sqlite', { config: V1_BODY });
    let off: TopupHarness | undefined;
    try {
      const body = (await on.post({ amount: 1 })).body;
      assert.equal(body.x402Version, 1);
      const payer = await on.payer(5n);
      const p = await signEip3009({
        token: body.accepts[0].asset,
        chainId: on.anvil.chainId,
        domain: USDC_DOMAIN,
        from: payer,
        to: body.accepts[0].payTo,
        value: BigInt(body.accepts[0].maxAmountRequired),
        validAfter: nowS() - 600n,
      });
      off = await startTopupHarness('sqlite', { payTo: on.payTo });
      const res = await off.post({ amount: 1 }, { 'x-payment': v1Header(body.accepts[0].network, p) });
      assert.equal(res.status, 200, res.text);
      assert.equal(await off.balance(payer.address), 1_000_000);
      assert.equal(await off.chain.balanceOf(off.chain.usdc, payer.address), 4n * USD);
      await off.gw.assertLedger();
    } finally {
      await off?.stop();
      await on.stop();
    }
  });
});

/**
 * Was broken (fixed: it now reads PAYMENT-REQUIRED): the project's own x402 client (`tollgate wallet topup`, `tollgate demo`'s walk-through:
 * src/gateway-client/topup-client.ts) reads the offer from the 402 **body**. With
 * topup.x402v1Body on, the body is v1 (network "base-sepolia", no Permit2 entry), so the wallet
 * can no longer top up at all: `--method permit2` says the gateway takes no Permit2 (it does, in
 * PAYMENT-REQUIRED), and the default EIP-3009 path picks a v1 entry that never equals a v2
 * requirement, hands the v1 entry to the v2 client, whose spend controls (keyed on the v1
 * network name) refuse it. DECISIONS.md claims v2 clients pay the same deployment; the dashboard was
 * changed to read the header, the wallet CLI was not.
 */
for (const engine of ENGINES) {
  describe(`attack: the wallet CLI's top-up client against a v1 body (${engine})`, () => {
    let h: TopupHarness;
    before(async () => {
      h = await startTopupHarness(engine, { config: V1_BODY });
    });
    after(async () => {
      await h?.gw.assertLedger();
      await h?.stop();
    });

    test('tollgate wallet topup (EIP-3009, the default) still pays when the v1 body is on', async () => {
      const payer = await h.payer(10n);
      const client = new GatewayClient(h.gw.url, payer);
      const paid = await topUp(client, 2, { method: 'eip3009' });
      assert.equal(paid.credited_usdc, 2_000_000);
      assert.equal(await h.balance(payer.address), 2_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, payer.address), 8n * USD);
    });

    test('tollgate wallet topup --method permit2 still pays USDT when the v1 body is on', async () => {
      const payer = await h.payer(10n);
      await h.chain.approvePermit2(payer, h.chain.usdt);
      const client = new GatewayClient(h.gw.url, payer);
      const paid = await topUp(client, 3, { method: 'permit2' });
      assert.equal(paid.credited_usdc, 3_000_000);
      assert.equal(await h.balance(payer.address), 3_000_000);
      assert.equal(await h.chain.balanceOf(h.chain.usdt, payer.address), 7n * USD);
    });
  });
}
