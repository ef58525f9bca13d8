import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { serializeErc6492Signature, type Address, type Hex } from 'viem';
import { USDC_DOMAIN, type FundedAccount } from '../../../src/devchain/deploy.ts';
import { call, startTestGateway } from '../../support/gateway.ts';
import { freePort } from '../../../src/devchain/ports.ts';
import { siweProof } from '../../support/siwe.ts';
import { startTopupHarness, USD, type TopupHarness } from '../../support/topup-harness.ts';
import { signEip3009, v2Header } from '../../support/x402-payloads.ts';

/**
 * Contract wallets (TestSmartWallet: ERC-1271, deployed by a CREATE2 factory) paying and signing
 * in. A deployed wallet is checked through ERC-1271; an undeployed one signs with ERC-6492 and is
 * accepted only when its factory is allowlisted.
 */
describe('contract wallets', () => {
  let h: TopupHarness;
  let offer: PaymentRequirements;
  let owner: FundedAccount;
  const salt = () => `0x${randomBytes(32).toString('hex')}` as Hex;
  // Every proof here creates a key, so each is signed for that action.
  const siwe = (wallet: Address, wrap?: (s: Hex) => Hex) =>
    siweProof({ address: wallet }, { signer: owner, chainId: h.anvil.chainId, wrapSignature: wrap, action: 'create-key' });
  before(async () => {
    h = await startTopupHarness('sqlite', { config: { siwe: { chainIds: [84532] } } });
    offer = (await h.post({ amount: 5 })).body.accepts[0];
    owner = await h.payer(0n);
  });
  after(() => h.stop());

  const undeployed = async () => {
    const s = salt();
    const { address, deployCalldata } = await h.chain.smartWallet(owner.address, s);
    const wrap = (signature: Hex) => serializeErc6492Signature({ address: h.chain.walletFactory, data: deployCalldata, signature });
    return { address, wrap };
  };

  test('a deployed ERC-1271 wallet tops up with USDC and signs in with SIWE', async () => {
    const wallet = await h.chain.deploySmartWallet(owner.address, salt());
    await h.chain.mintUsdc(wallet, 10n * USD);
    const payload = await signEip3009({
      token: h.chain.usdc,
      chainId: h.anvil.chainId,
      domain: USDC_DOMAIN,
      from: { address: wallet },
      signer: owner,
      to: h.payTo.address,
      value: 5n * USD,
    });
    const res = await h.post({ amount: 5 }, { 'payment-signature': v2Header(offer, payload) });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.wallet, wallet.toLowerCase());
    assert.equal(await h.balance(wallet), 5_000_000);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, wallet), 5n * USD);

    const key = await call(h.gw.url, 'POST', '/v1/auth/keys', await siwe(wallet));
    assert.equal(key.status, 201, key.text);
    const usage = await call(h.gw.url, 'GET', `/v1/usage/${wallet}`, undefined, { authorization: `Bearer ${key.body.key}` });
    assert.equal(usage.status, 200, 'the key belongs to the contract wallet');
    assert.equal(usage.body.balance_usdc, 5_000_000);
    // The owner's signature does not make the owner's own address the signer, nor another wallet.
    const other = await h.chain.deploySmartWallet((await h.payer(0n)).address, salt());
    assert.equal((await call(h.gw.url, 'POST', '/v1/auth/keys', await siwe(other))).status, 401);
    await h.gw.assertLedger();
  });

  test('an undeployed ERC-6492 wallet is refused while its factory is not allowlisted', async () => {
    const { address, wrap } = await undeployed();
    await h.chain.mintUsdc(address, 10n * USD);
    assert.equal((await call(h.gw.url, 'POST', '/v1/auth/keys', await siwe(address, wrap))).status, 401);
    const payload = await signEip3009({
      token: h.chain.usdc,
      chainId: h.anvil.chainId,
      domain: USDC_DOMAIN,
      from: { address },
      signer: owner,
      to: h.payTo.address,
      value: 5n * USD,
      wrapSignature: wrap,
    });
    const res = await h.post({ amount: 5 }, { 'payment-signature': v2Header(offer, payload) });
    assert.equal(res.status, 402, res.text);
    assert.equal(res.body.error, 'PAYMENT_REJECTED');
    assert.equal(await h.balance(address), 0);
    assert.equal(await h.chain.balanceOf(h.chain.usdc, address), 10n * USD);
    await h.gw.assertLedger();
  });

  test('with the factory allowlisted, the undeployed wallet signs in and pays (the facilitator deploys it)', async () => {
    const allowing = await startTestGateway({
      engine: 'sqlite',
      env: h.env,
      config: {
        ...h.gatewayConfig,
        siwe: { chainIds: [84532], allowedFactories: [h.chain.walletFactory] },
        topup: { ...(h.gatewayConfig.topup as object), facilitator: { type: 'local', allowedFactories: [h.chain.walletFactory] } },
      },
    });
    try {
      const { address, wrap } = await undeployed();
      await h.chain.mintUsdc(address, 10n * USD);
      const key = await call(allowing.url, 'POST', '/v1/auth/keys', await siwe(address, wrap));
      assert.equal(key.status, 201, key.text);
      const payload = await signEip3009({
        token: h.chain.usdc,
        chainId: h.anvil.chainId,
        domain: USDC_DOMAIN,
        from: { address },
        signer: owner,
        to: h.payTo.address,
        value: 5n * USD,
        wrapSignature: wrap,
      });
      const res = await call(allowing.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': v2Header(offer, payload) });
      assert.equal(res.status, 200, res.text);
      assert.notEqual(await h.chain.client(owner).getCode({ address }), undefined);
      assert.equal(await h.chain.balanceOf(h.chain.usdc, address), 5n * USD);
      await allowing.assertLedger();
    } finally {
      await allowing.stop();
    }
  });

  test('SIWE from a contract wallet while the RPC is down is 503, not 401', async () => {
    const wallet = await h.chain.deploySmartWallet(owner.address, salt());
    const down = await startTestGateway({
      engine: 'sqlite',
      config: { siwe: { chainIds: [84532] }, chains: { '84532': { rpcUrl: `http://127.0.0.1:${await freePort()}` } } },
    });
    try {
      const res = await call(down.url, 'POST', '/v1/auth/keys', await siwe(wallet));
      assert.equal(res.status, 503, res.text);
    } finally {
      await down.stop();
    }
  });

  test("a payment on a chain other than the contract-wallet chain needs the payer's code: an RPC outage there is 503, nothing recorded", async () => {
    const payTo = h.payTo.address;
    const down = await startTestGateway({
      engine: 'sqlite',
      env: h.env,
      config: {
        chains: { '84532': { rpcUrl: h.anvil.rpcUrl }, '8453': { rpcUrl: `http://127.0.0.1:${await freePort()}` } },
        siwe: { chainIds: [84532, 8453], contractWalletChainId: 84532 },
        topup: { payTo, offers: [{ network: 'eip155:8453', asset: h.chain.usdc, transferMethod: 'eip3009', ...USDC_DOMAIN, decimals: 6 }] },
      },
    });
    try {
      const offer8453 = (await call(down.url, 'POST', '/v1/topup', { amount: 5 })).body.accepts[0];
      const payload = await signEip3009({ token: h.chain.usdc, chainId: 8453, domain: USDC_DOMAIN, from: owner, to: payTo, value: 5n * USD });
      const res = await call(down.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': v2Header(offer8453, payload) });
      assert.equal(res.status, 503, res.text);
      assert.equal(res.body.error, 'FACILITATOR_UNAVAILABLE');
      assert.match(res.body.message, /RPC for eip155:8453 did not answer; nothing was settled or credited/);
      assert.equal((await down.services.storage.db.selectFrom('payments').select('id').execute()).length, 0);
    } finally {
      await down.stop();
    }
  });
});
