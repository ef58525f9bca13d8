import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ENGINES } from '../support/engines.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { freePort } from '../../src/devchain/ports.ts';
import { newAccount, proofQuery, siweProof, createKeyProof } from '../support/siwe.ts';

const MIN = 60_000;

for (const engine of ENGINES) {
  describe(`SIWE verification (${engine})`, () => {
    let gw: TestGateway;
    before(async () => {
      gw = await startTestGateway({ engine });
    });
    after(() => gw.stop());

    const createKey = (proof: { message: string; signature: string }) => call(gw.url, 'POST', '/v1/auth/keys', proof);

    async function expect401(proof: { message: string; signature: string }, reason: RegExp) {
      const res = await createKey(proof);
      assert.equal(res.status, 401, res.text);
      assert.equal(res.body.error, 'UNAUTHORIZED');
      assert.match(res.body.message, reason);
    }

    test('a valid proof creates a key', async () => {
      const res = await createKey(await createKeyProof(newAccount()));
      assert.equal(res.status, 201, res.text);
    });

    test('wrong domain', async () => {
      await expect401(await siweProof(newAccount(), { domain: 'evil.example' }), /domain "evil.example" is not accepted/);
    });

    test('wrong uri', async () => {
      await expect401(await siweProof(newAccount(), { uri: 'https://evil.example/login' }), /uri .* is not accepted/);
    });

    test('wrong chain', async () => {
      await expect401(await siweProof(newAccount(), { chainId: 137 }), /chain id 137 is not accepted/);
    });

    test('issuedAt too old', async () => {
      await expect401(await siweProof(newAccount(), { issuedAt: new Date(Date.now() - 6 * MIN) }), /issued more than 300 s ago/);
    });

    test('issuedAt in the future', async () => {
      await expect401(await siweProof(newAccount(), { issuedAt: new Date(Date.now() + 2 * MIN) }), /in the future/);
    });

    test('issuedAt slightly ahead (within the 60 s skew) is accepted', async () => {
      const res = await createKey(await createKeyProof(newAccount(), { issuedAt: new Date(Date.now() + 30_000) }));
      assert.equal(res.status, 201, res.text);
    });

    test('expired', async () => {
      await expect401(await siweProof(newAccount(), { issuedAt: new Date(Date.now() - MIN), expirationTime: new Date(Date.now() - 1000) }), /expired/);
    });

    test('not yet valid', async () => {
      await expect401(await siweProof(newAccount(), { notBefore: new Date(Date.now() + MIN) }), /not valid yet/);
    });

    test('malformed message', async () => {
      await expect401({ message: 'please let me in', signature: '0x1234' }, /not a valid EIP-4361 message/);
      const proof = await siweProof(newAccount());
      await expect401({ ...proof, message: proof.message.replace('Version: 1', 'Version: 2') }, /not a valid EIP-4361 message/);
    });

    test('oversized message and signature', async () => {
      const account = newAccount();
      await expect401(await siweProof(account, { statement: 'x'.repeat(5000) }), /larger than 4096 bytes/);
      const proof = await siweProof(account);
      await expect401({ ...proof, signature: `0x${'ab'.repeat(1100)}` }, /longer than 2048/);
    });

    test('bad signature', async () => {
      const proof = await siweProof(newAccount());
      await expect401({ ...proof, signature: 'not-hex' }, /must be 0x-prefixed hex/);
      await expect401({ ...proof, signature: `0x${'11'.repeat(65)}` }, /does not match the address/);
      await expect401({ ...proof, signature: '0x1234' }, /does not match the address/);
    });

    test('signature by another address', async () => {
      await expect401(await siweProof(newAccount(), { signer: newAccount() }), /does not match the address/);
    });

    test('tampered message', async () => {
      const proof = await siweProof(newAccount());
      await expect401({ ...proof, message: proof.message.replace('Manage my Tollgate API keys', 'Manage all Tollgate API keys') }, /does not match/);
    });

    test('missing message or signature', async () => {
      // Spec section 5, rule 1: a missing proof is a failed authentication, not a malformed body.
      const res = await call(gw.url, 'POST', '/v1/auth/keys', { label: 'x' });
      assert.equal(res.status, 401);
      assert.match(res.body.message, /missing SIWE message/);
    });

    test('replayed nonce is refused, on the same and on a different endpoint of its action', async () => {
      const account = newAccount();
      const proof = await createKeyProof(account);
      assert.equal((await createKey(proof)).status, 201);
      await expect401(proof, /already used/);

      // A proof first used to list keys cannot then revoke one or read usage (same action, nonce spent).
      const second = await siweProof(account);
      assert.equal((await call(gw.url, 'GET', `/v1/auth/keys?${proofQuery(second)}`)).status, 200);
      const revoke = await call(gw.url, 'DELETE', '/v1/auth/keys/1', second);
      assert.equal(revoke.status, 401);
      assert.match(revoke.body.message, /already used/);
      const usage = await call(gw.url, 'GET', `/v1/usage/${account.address}?${proofQuery(second)}`);
      assert.equal(usage.status, 401);
    });

    test('a refused proof does not use up its nonce', async () => {
      const account = newAccount();
      const proof = await createKeyProof(account);
      const refused = await call(gw.url, 'POST', '/v1/auth/keys', { ...proof, ref_code: 'ref-aaaaaaaaaa', redeem_code: 'rc-aaaaaaaaaaaaaaaaaaaaaa' });
      assert.equal(refused.status, 400);
      assert.equal((await createKey(proof)).status, 201);
    });
  });
}

describe('SIWE with a contract-wallet check and the RPC down', () => {
  let gw: TestGateway;
  before(async () => {
    // Nothing listens on this port: any RPC call fails to connect.
    const deadPort = await freePort();
    gw = await startTestGateway({ engine: 'sqlite', config: { chains: { '8453': { rpcUrl: `http://127.0.0.1:${deadPort}` } } } });
  });
  after(() => gw.stop());

  test("a signature that is not the EOA's needs the RPC, and its outage is 503", async () => {
    const res = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount(), { signer: newAccount() }));
    assert.equal(res.status, 503, res.text);
    assert.equal(res.body.error, 'SERVICE_UNAVAILABLE');
    assert.match(res.body.message, /RPC could not be reached/);
  });

  test("a signature that is not the EOA's, with another chain id than the contract-wallet chain, is 401 without asking the RPC", async () => {
    assert.equal(gw.config.siwe.contractWalletChainId, 8453, 'the only SIWE chain with an RPC');
    const res = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount(), { signer: newAccount(), chainId: 84532 }));
    assert.equal(res.status, 401, res.text);
    assert.match(res.body.message, /contract wallets sign in only on chain 8453: sign a new message with Chain ID: 8453/);
  });

  test('an EOA signature never touches the RPC', async () => {
    const res = await call(gw.url, 'POST', '/v1/auth/keys', await createKeyProof(newAccount()));
    assert.equal(res.status, 201, res.text);
  });
});
