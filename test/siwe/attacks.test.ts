import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { parseSignature, serializeErc6492Signature, serializeSignature, type Hex } from 'viem';
import { ENGINES } from '../support/engines.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { newAccount, siweProof } from '../support/siwe.ts';
import { devChain } from '../support/topup-harness.ts';

/**
 * Attacks on SIWE sign-in for contract wallets, on a real anvil chain that
 * is the contract-wallet chain, with the test wallet factory allowlisted for ERC-6492. Each test
 * forges a proof for someone else's account; each must be 401 and create nothing.
 */
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const salt = () => `0x${randomBytes(32).toString('hex')}` as Hex;

for (const engine of ENGINES) {
  describe(`attack: SIWE proofs (${engine})`, () => {
    let gw: TestGateway;
    let chain: Awaited<ReturnType<typeof devChain>>['chain'];
    let chainId: number;
    before(async () => {
      const dev = await devChain();
      chain = dev.chain;
      chainId = dev.anvil.chainId;
      gw = await startTestGateway({
        engine,
        config: {
          chains: { [String(chainId)]: { rpcUrl: dev.anvil.rpcUrl } },
          siwe: { chainIds: [chainId], allowedFactories: [chain.walletFactory] },
          rateLimits: { public: { perMinute: 100_000 }, keys: { perMinute: 100_000 } },
        },
      });
      assert.equal(gw.config.siwe.contractWalletChainId, chainId);
    });
    after(() => gw?.stop());

    const createKey = (proof: { message: string; signature: string }) => call(gw.url, 'POST', '/v1/auth/keys', proof);
    const keysOf = (address: string) => gw.services.storage.db.selectFrom('api_keys').select('id').where('wallet', '=', address.toLowerCase()).execute();

    test("ERC-6492: a wrapper that deploys the attacker's own wallet does not sign for the victim's counterfactual wallet", async () => {
      const [victimOwner, attacker] = [newAccount(), newAccount()];
      const victim = await chain.smartWallet(victimOwner.address, salt());
      const own = await chain.smartWallet(attacker.address, salt());
      const forged = await siweProof(
        { address: victim.address },
        {
          chainId,
          signer: attacker,
          wrapSignature: (signature) => serializeErc6492Signature({ address: chain.walletFactory, data: own.deployCalldata, signature }),
        },
      );
      const res = await createKey(forged);
      assert.equal(res.status, 401, res.text);
      // The victim's own deployment calldata with the attacker's signature inside: refused too.
      const withVictimsCalldata = await siweProof(
        { address: victim.address },
        {
          chainId,
          signer: attacker,
          wrapSignature: (signature) => serializeErc6492Signature({ address: chain.walletFactory, data: victim.deployCalldata, signature }),
        },
      );
      assert.equal((await createKey(withVictimsCalldata)).status, 401);
      assert.equal((await keysOf(victim.address)).length, 0);
    });

    test("ERC-6492 around the attacker's key signature does not sign for another key's address", async () => {
      const [victim, attacker] = [newAccount(), newAccount()];
      const { deployCalldata } = await chain.smartWallet(attacker.address, salt());
      const wrap = (signature: Hex) => serializeErc6492Signature({ address: chain.walletFactory, data: deployCalldata, signature });
      const forged = await createKey(await siweProof({ address: victim.address }, { chainId, signer: attacker, wrapSignature: wrap }));
      assert.equal(forged.status, 401, forged.text);
      assert.equal((await keysOf(victim.address)).length, 0);
      // (The victim's own key signature wrapped the same way is refused as well: the ERC-6492 validator
      // checks the wrapped bytes, not the key signature inside. A key signs unwrapped.)
      const own = await createKey(await siweProof(victim, { chainId, action: 'create-key' }));
      assert.equal(own.status, 201, own.text);
    });

    test('a used proof replayed as upper-case hex, high-s or with v 0/1 is refused: the nonce is spent, whatever the encoding', async () => {
      const account = newAccount();
      const proof = await siweProof(account, { chainId, action: 'create-key' });
      assert.equal((await createKey(proof)).status, 201);
      const { r, s, yParity } = parseSignature(proof.signature as Hex);
      const variants = [
        `0x${proof.signature.slice(2).toUpperCase()}`,
        serializeSignature({ r, s: `0x${(SECP256K1_N - BigInt(s)).toString(16).padStart(64, '0')}`, yParity: 1 - yParity! }),
        `${proof.signature.slice(0, 130)}${yParity === 0 ? '00' : '01'}`,
      ];
      for (const signature of variants) {
        const res = await createKey({ message: proof.message, signature });
        assert.equal(res.status, 401, res.text);
        assert.match(res.body.message, /already used/);
      }
      assert.equal((await keysOf(account.address)).length, 1);
    });
  });
}
