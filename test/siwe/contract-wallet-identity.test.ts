import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { PaymentRequirements } from '@x402/core/types';
import { concatHex, serializeErc6492Signature, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { parseConfig } from '../../src/config/load.ts';
import { classifyCode } from '../../src/chain/account-code.ts';
import { startAnvil, type Anvil } from '../../src/devchain/anvil.ts';
import { deployDevChain, USDC_DOMAIN, type DevChain, type FundedAccount } from '../../src/devchain/deploy.ts';
import { getBalance } from '../../src/ledger/balances.ts';
import { ENGINES } from '../support/engines.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { newAccount, proofQuery, siweProof } from '../support/siwe.ts';
import type { SiweAction } from '../../src/siwe/actions.ts';
import { USD } from '../support/topup-harness.ts';
import { signEip3009, v2Header } from '../support/x402-payloads.ts';

/**
 * A contract at the same address on another chain must not own the wallet's account.
 * Two real anvil chains: 84532 is the contract-wallet (identity) chain, 8453 is another allowed chain
 * where the attacker controls the victim's address. The rule under test: a key (ECDSA, or an EIP-7702
 * account) signs with any chain id; a contract wallet (ERC-1271 / ERC-6492) signs in and pays only
 * on the identity chain.
 */

/** Runtime code that answers every call with the ERC-1271 magic value 0x1626ba7e: "any signature is mine". */
const ALWAYS_VALID: Hex = '0x631626ba7e60e01b60005260206000f3';
const JUNK: Hex = `0x${'00'.repeat(65)}`;
const HOME = 84532;
const OTHER = 8453;

describe('contract-wallet chain in the configuration', () => {
  const rpc = (id: number) => ({ [String(id)]: { rpcUrl: `http://127.0.0.1:1/${id}` } });

  test('defaults to the only SIWE chain with an RPC, and to none without one', () => {
    assert.equal(parseConfig({ chains: rpc(HOME) }).siwe.contractWalletChainId, HOME);
    assert.equal(parseConfig({ siwe: { chainIds: [1, OTHER] }, chains: { ...rpc(HOME), ...rpc(OTHER) } }).siwe.contractWalletChainId, OTHER);
    assert.equal(parseConfig({}).siwe.contractWalletChainId, null);
  });

  test('with RPCs for several SIWE chains it must be chosen, and must be a SIWE chain with an RPC', () => {
    assert.throws(() => parseConfig({ chains: { ...rpc(HOME), ...rpc(OTHER) } }), /siwe\.contractWalletChainId: required because .*8453, 84532/);
    assert.equal(parseConfig({ siwe: { contractWalletChainId: HOME }, chains: { ...rpc(HOME), ...rpc(OTHER) } }).siwe.contractWalletChainId, HOME);
    assert.throws(() => parseConfig({ siwe: { contractWalletChainId: 137 }, chains: rpc(HOME) }), /137 is not in siwe\.chainIds/);
    assert.throws(() => parseConfig({ siwe: { contractWalletChainId: OTHER }, chains: rpc(HOME) }), /needs chains\."8453"\.rpcUrl/);
  });

  test('an EIP-7702 delegation is told apart from contract code', () => {
    assert.equal(classifyCode(undefined), 'none');
    assert.equal(classifyCode('0x'), 'none');
    assert.equal(classifyCode(concatHex(['0xef0100', privateKeyToAccount(generatePrivateKey()).address])), 'delegated');
    assert.equal(classifyCode(ALWAYS_VALID), 'contract');
    // A longer code that merely starts like a delegation is a contract.
    assert.equal(classifyCode(concatHex(['0xef0100', privateKeyToAccount(generatePrivateKey()).address, '0x00'])), 'contract');
  });
});

describe('contract-wallet identity across two chains', () => {
  let home: { anvil: Anvil; chain: DevChain };
  let other: { anvil: Anvil; chain: DevChain };
  let relayer: FundedAccount;
  let payTo: Address;
  const salt = () => `0x${randomBytes(32).toString('hex')}` as Hex;
  const setCode = (a: Anvil, address: Address, code: Hex) => a.rpc('anvil_setCode', [address, code]);

  before(async () => {
    const [a, b] = await Promise.all([startAnvil({ chainId: HOME }), startAnvil({ chainId: OTHER })]);
    home = { anvil: a, chain: await deployDevChain(a) };
    other = { anvil: b, chain: await deployDevChain(b) };
    // The same factory address exists on the other chain (deterministic deployments make this
    // common); whatever sits there, the gateway cannot know it is the same owner's wallet.
    const factoryCode = await home.chain.client(await home.chain.newAccount()).getCode({ address: home.chain.walletFactory });
    await setCode(b, home.chain.walletFactory, factoryCode!);
    const relayerKey = generatePrivateKey();
    relayer = Object.assign(privateKeyToAccount(relayerKey), { privateKey: relayerKey });
    for (const x of [a, b]) await x.rpc('anvil_setBalance', [relayer.address, '0x56BC75E2D63100000']);
    payTo = privateKeyToAccount(generatePrivateKey()).address;
  });
  after(async () => {
    await Promise.all([home?.anvil.stop(), other?.anvil.stop()]);
  });

  const gatewayFor = (engine: (typeof ENGINES)[number]) =>
    startTestGateway({
      engine,
      env: { TOLLGATE_RELAYER_KEY: relayer.privateKey },
      config: {
        chains: { [String(HOME)]: { rpcUrl: home.anvil.rpcUrl }, [String(OTHER)]: { rpcUrl: other.anvil.rpcUrl } },
        siwe: { chainIds: [HOME, OTHER], contractWalletChainId: HOME, allowedFactories: [home.chain.walletFactory] },
        topup: {
          payTo,
          settleWaitSeconds: 5,
          offers: [home, other].map(({ chain }) => ({ network: chain.network, asset: chain.usdc, transferMethod: 'eip3009', ...USDC_DOMAIN, decimals: 6 })),
          facilitator: { type: 'local', allowedFactories: [home.chain.walletFactory] },
        },
        rateLimits: { public: { perMinute: 100_000 }, keys: { perMinute: 100_000 } },
      },
    });

  for (const engine of ENGINES) {
    describe(engine, () => {
      let gw: TestGateway;
      before(async () => {
        gw = await gatewayFor(engine);
      });
      after(() => gw?.stop());

      const createKey = (proof: { message: string; signature: string }) => call(gw.url, 'POST', '/v1/auth/keys', proof);
      const listKeys = (proof: { message: string; signature: string }) => call(gw.url, 'GET', `/v1/auth/keys?${proofQuery(proof)}`);
      /** A SIWE message for `address` whose signature is junk: only a yes-to-anything contract accepts it. */
      const junkProof = async (address: Address, chainId: number) => ({
        ...(await siweProof({ address }, { chainId, signer: newAccount() })),
        signature: JUNK,
      });
      const assertRefused = (res: Awaited<ReturnType<typeof call>>, reason: RegExp) => {
        assert.equal(res.status, 401, res.text);
        assert.equal(res.body.error, 'UNAUTHORIZED');
        assert.match(res.body.message, reason);
      };

      test("a yes-to-anything contract at the victim's address on another chain cannot create, list, revoke or read usage", async () => {
        const owner = await home.chain.newAccount();
        const victim = await home.chain.deploySmartWallet(owner.address, salt());
        const ownerProof = (chainId = HOME, action: SiweAction = 'manage-keys') => siweProof({ address: victim }, { chainId, signer: owner, action });
        const created = await createKey(await ownerProof(HOME, 'create-key'));
        assert.equal(created.status, 201, created.text);
        // The attacker owns the same address on 8453.
        await setCode(other.anvil, victim, ALWAYS_VALID);

        const sign = /contract wallets sign in only on chain 84532: sign a new message with Chain ID: 84532/;
        assertRefused(await createKey(await junkProof(victim, OTHER)), sign);
        assertRefused(await listKeys(await junkProof(victim, OTHER)), sign);
        assertRefused(await call(gw.url, 'DELETE', `/v1/auth/keys/${created.body.id}`, await junkProof(victim, OTHER)), sign);
        assertRefused(await call(gw.url, 'GET', `/v1/usage/${victim}?${proofQuery(await junkProof(victim, OTHER))}`), sign);
        // Even the owner's real signature counts only with the identity chain's id.
        assertRefused(await createKey(await ownerProof(OTHER, 'create-key')), sign);

        // The owner is untouched: one key, still active, and it still works.
        const listed = await listKeys(await ownerProof());
        assert.equal(listed.status, 200, listed.text);
        assert.deepEqual(
          listed.body.data.map((k: { id: number; revoked_at: string | null }) => [k.id, k.revoked_at]),
          [[created.body.id, null]],
        );
        const usage = await call(gw.url, 'GET', `/v1/usage/${victim}`, undefined, { authorization: `Bearer ${created.body.key}` });
        assert.equal(usage.status, 200, usage.text);
        const revoked = await call(gw.url, 'DELETE', `/v1/auth/keys/${created.body.id}`, await ownerProof());
        assert.equal(revoked.status, 200, revoked.text);
        await gw.assertLedger();
      });

      test('an undeployed ERC-6492 wallet from an allowlisted factory signs in on the identity chain only', async () => {
        const owner = await home.chain.newAccount();
        const { address, deployCalldata } = await home.chain.smartWallet(owner.address, salt());
        const wrap = (signature: Hex) => serializeErc6492Signature({ address: home.chain.walletFactory, data: deployCalldata, signature });
        const proof = (chainId: number) => siweProof({ address }, { chainId, signer: owner, wrapSignature: wrap, action: 'create-key' });

        const ok = await createKey(await proof(HOME));
        assert.equal(ok.status, 201, ok.text);
        // On 8453 the same factory address would deploy a wallet at the same address, and the
        // signature would check out there; it is still refused, because 8453 is not the identity chain.
        assertRefused(await createKey(await proof(OTHER)), /sign a new message with Chain ID: 84532/);
        assertRefused(await listKeys(await proof(OTHER)), /Chain ID: 84532/);
        assert.equal(await other.chain.client(owner).getCode({ address }), undefined, 'verification never deploys');
      });

      test('an EIP-7702 account is judged by its key on every chain, never by its delegate', async () => {
        const account = newAccount();
        const delegate = privateKeyToAccount(generatePrivateKey()).address;
        for (const c of [home, other]) {
          await setCode(c.anvil, delegate, ALWAYS_VALID);
          await setCode(c.anvil, account.address, concatHex(['0xef0100', delegate]));
        }
        assert.equal((await createKey(await siweProof(account, { chainId: HOME, action: 'create-key' }))).status, 201);
        assert.equal((await createKey(await siweProof(account, { chainId: OTHER, action: 'create-key' }))).status, 201);
        assertRefused(await createKey(await junkProof(account.address, HOME)), /EIP-7702 account signs with its own key/);
        assertRefused(await createKey(await junkProof(account.address, OTHER)), /sign a new message with Chain ID: 84532/);
        const listed = await listKeys(await siweProof(account, { chainId: OTHER }));
        assert.equal(listed.status, 200, listed.text);
        assert.equal(listed.body.data.length, 2, 'only the two key-signed requests created keys');
      });

      describe('top-ups', () => {
        let offers: Record<number, PaymentRequirements>;
        before(async () => {
          const res = await call(gw.url, 'POST', '/v1/topup', { amount: 5 });
          assert.equal(res.status, 402, res.text);
          const accepts = res.body.accepts as PaymentRequirements[];
          offers = { [HOME]: accepts.find((a) => a.network === home.chain.network)!, [OTHER]: accepts.find((a) => a.network === other.chain.network)! };
        });
        const pay = async (c: { anvil: Anvil; chain: DevChain }, from: Address, signer: FundedAccount, wrapSignature?: (s: Hex) => Hex) => {
          const payload = await signEip3009({
            token: c.chain.usdc,
            chainId: c.anvil.chainId,
            domain: USDC_DOMAIN,
            from: { address: from },
            signer,
            to: payTo,
            value: 5n * USD,
            wrapSignature,
          });
          return call(gw.url, 'POST', '/v1/topup', { amount: 5 }, { 'payment-signature': v2Header(offers[c.anvil.chainId]!, payload) });
        };
        const credited = async (address: Address) => (await getBalance(gw.services.storage.db, address)).balance_usdc;

        test('a contract wallet paying on another chain is refused before settlement; on the identity chain it pays', async () => {
          const owner = await other.chain.newAccount();
          const onOther = await other.chain.deploySmartWallet(owner.address, salt());
          await other.chain.mintUsdc(onOther, 10n * USD);
          const refused = await pay(other, onOther, owner);
          assert.equal(refused.status, 400, refused.text);
          assert.equal(refused.body.error, 'PAYMENT_MISMATCH');
          assert.match(refused.body.message, /is a contract wallet on eip155:8453, but a contract wallet's account is its contract on eip155:84532 only/);
          assert.equal(await other.chain.balanceOf(other.chain.usdc, onOther), 10n * USD, 'nothing moved on chain');
          assert.equal(await credited(onOther), 0);

          const onHome = await home.chain.deploySmartWallet(owner.address, salt());
          await home.chain.mintUsdc(onHome, 10n * USD);
          const paid = await pay(home, onHome, owner);
          assert.equal(paid.status, 200, paid.text);
          assert.equal(await credited(onHome), 5_000_000);
          await gw.assertLedger();
        });

        test('an undeployed (ERC-6492) wallet paying on another chain is refused too', async () => {
          const owner = await other.chain.newAccount();
          // The factory address is allowlisted for the facilitator and exists on 8453 as well.
          const { address, deployCalldata } = await home.chain.smartWallet(owner.address, salt());
          await other.chain.mintUsdc(address, 10n * USD);
          const wrap = (signature: Hex) => serializeErc6492Signature({ address: home.chain.walletFactory, data: deployCalldata, signature });
          const refused = await pay(other, address, owner, wrap);
          assert.equal(refused.status, 400, refused.text);
          assert.equal(refused.body.error, 'PAYMENT_MISMATCH');
          assert.match(refused.body.message, /not deployed yet \(ERC-6492\)/);
          assert.equal(await other.chain.client(owner).getCode({ address }), undefined, 'the facilitator did not deploy it');
          assert.equal(await credited(address), 0);
          await gw.assertLedger();
        });

        test('a plain wallet pays on either chain', async () => {
          const payer = await other.chain.newAccount({ usdc: 10n * USD });
          const paid = await pay(other, payer.address, payer);
          assert.equal(paid.status, 200, paid.text);
          assert.equal(await credited(payer.address), 5_000_000);
          await gw.assertLedger();
        });
      });
    });
  }
});
