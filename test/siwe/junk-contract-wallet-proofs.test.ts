import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Address } from 'viem';
import { ENGINES } from '../support/engines.ts';
import { call, startTestGateway, type TestGateway } from '../support/gateway.ts';
import { createKeyProof, newAccount } from '../support/siwe.ts';
import { startSiwxJunkHarness, type SiwxJunkHarness } from '../support/siwx-junk-harness.ts';
import { devChain } from '../support/topup-harness.ts';

/**
 * A junk proof that only looks like a contract wallet's (the ERC-6492 suffix after bytes that do not
 * decode) is a failed authentication like any junk proof: 401, counted per client address, then the
 * 429. It once threw inside the contract-wallet check, whose catch took every throw for the RPC
 * being down: 503 "try again shortly", never counted, so one address could send them without end,
 * each costing the gateway an eth_getCode on the contract-wallet chain.
 */
const LIMIT = 3;
const ERC6492_SUFFIX = '6492649264926492649264926492649264926492649264926492649264926492';
const ERC8010_SUFFIX = '8010801080108010801080108010801080108010801080108010801080108010';

for (const engine of ENGINES.slice(0, 1)) {
  describe(`attack: junk contract-wallet proofs against the failed-authentication limit (${engine})`, () => {
    let gw: TestGateway;
    let chainId: number;
    let deployed: Address;
    before(async () => {
      const dev = await devChain();
      chainId = dev.anvil.chainId;
      deployed = dev.chain.walletFactory;
      gw = await startTestGateway({
        engine,
        config: {
          chains: { [String(chainId)]: { rpcUrl: dev.anvil.rpcUrl } },
          siwe: { chainIds: [chainId], allowedFactories: [dev.chain.walletFactory] },
          rateLimits: { public: { perMinute: 100_000 }, keys: { perMinute: 100_000 }, authFailures: { perMinute: LIMIT } },
        },
      });
      assert.equal(gw.config.siwe.contractWalletChainId, chainId);
    });
    after(() => gw?.stop());

    test('proofs whose ERC-6492 or ERC-8010 wrapper does not decode are 401 and counted, then 429: never a 503 that costs nothing', async () => {
      const keys = (proof: { message: string; signature: string }) => call(gw.url, 'POST', '/v1/auth/keys', proof);
      // An ERC-8010 wrapper, for an address with code (the wallet factory): verified by viem, whose decoder throws.
      const forContract = await createKeyProof({ address: deployed }, { chainId, signer: newAccount() });
      const first = await keys({ ...forContract, signature: `0x${'cd'.repeat(65)}${ERC8010_SUFFIX}` });
      assert.equal(first.status, 401, `junk ERC-8010 proof: ${first.text}`);
      // An ERC-6492 wrapper, for an address with no code: its wrapper read by the gateway, which throws.
      const junk6492 = async () => ({ ...(await createKeyProof(newAccount(), { chainId })), signature: `0x${'ab'.repeat(65)}${ERC6492_SUFFIX}` });
      for (let i = 1; i < LIMIT; i++) {
        const res = await keys(await junk6492());
        assert.equal(res.status, 401, `junk ERC-6492 proof ${i}: ${res.text}`);
      }
      const refused = await keys(await junk6492());
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.body.error, 'RATE_LIMITED');
    });
  });
}

describe('attack: junk sign-in-with-x headers whose contract-wallet wrapper does not decode (rateLimits.authFailures)', () => {
  let s: SiwxJunkHarness;
  before(async () => {
    s = await startSiwxJunkHarness(LIMIT);
  });
  after(() => s.stop());

  test('junk SIWX headers naming a contract, their signature an ERC-8010 wrapper that does not decode: counted, then 429, the RPC asked a bounded number of times', async () => {
    // The USDC contract: code on the contract-wallet chain, so its check asks the RPC.
    const junk = () => s.junkNaming(s.h.chain.usdc, `0x${'cd'.repeat(65)}${ERC8010_SUFFIX}`);
    const rounds = 4 * LIMIT;
    const statuses: number[] = [];
    const before = s.rpcCalls.length;
    for (let i = 0; i < rounds; i++) statuses.push((await s.post({ 'sign-in-with-x': await junk() })).status);
    const rpc = s.rpcCalls.slice(before).filter((m) => m === 'eth_getCode' || m === 'eth_call').length;
    assert.ok(!statuses.includes(503), `a junk header is not an RPC outage: ${statuses.join(',')}`);
    assert.ok(statuses.includes(429), `${rounds} junk SIWX headers from one address were all checked: ${statuses.join(',')}`);
    assert.ok(rpc <= 2 * LIMIT, `${rpc} RPC calls (eth_getCode/eth_call) for ${rounds} junk SIWX headers`);
  });
});
