import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call } from '../../support/gateway.ts';
import { newAccount, siweProof } from '../../support/siwe.ts';
import { startSiwxJunkHarness, type SiwxJunkHarness } from '../../support/siwx-junk-harness.ts';

/**
 * Every failed authentication (a bad API key, a junk SIWE proof: "each one a
 * signature check, possibly an RPC call") counts against rateLimits.authFailures per client address,
 * so junk stops costing the gateway anything. A junk `sign-in-with-x` header is the same thing (the
 * same SiweVerifier, the same ecrecover, the same ERC-1271 RPC calls), but spendWithSiwx turns its
 * 401 into a 402 and never goes through authFailureLimit: one address can send junk SIWX proofs at
 * the public rate (300/min by default, 10x authFailures' 30/min), each naming a contract on the
 * contract-wallet chain so that it costs the gateway's RPC an eth_getCode and an eth_call, and is
 * never blocked.
 */
const AUTH_FAILURES = 3;

describe('attack: junk sign-in-with-x proofs are not counted as failed authentications (rateLimits.authFailures)', () => {
  let s: SiwxJunkHarness;
  before(async () => {
    s = await startSiwxJunkHarness(AUTH_FAILURES);
  });
  after(() => s.stop());

  test('a SIWE junk proof is blocked after authFailures; a junk SIWX proof from the same address is checked (with RPC calls) every time', async () => {
    // The control: SIWE junk proofs from this address are blocked after AUTH_FAILURES.
    const siweStatuses: number[] = [];
    for (let i = 0; i < AUTH_FAILURES + 1; i++) {
      const junk = { ...(await siweProof(newAccount())), signature: `0x${'11'.repeat(65)}` };
      siweStatuses.push((await call(s.h.gw.url, 'POST', '/v1/auth/keys', junk)).status);
    }
    assert.equal(siweStatuses.at(-1), 429, `SIWE junk is limited: ${siweStatuses}`);
    // This address is now blocked for every credential the failure limit guards; SIWX is not one of them.

    const rounds = 4 * AUTH_FAILURES;
    const statuses: number[] = [];
    const before = s.rpcCalls.length;
    for (let i = 0; i < rounds; i++) {
      // The USDC contract: code on the contract-wallet chain, so every check asks the RPC.
      const res = await s.post({ 'sign-in-with-x': await s.junkNaming(s.h.chain.usdc) });
      statuses.push(res.status);
    }
    const siwxRpc = s.rpcCalls.slice(before).filter((m) => m === 'eth_getCode' || m === 'eth_call').length;
    // What the failed-authentication limit asks of every proof: after authFailures, a 429 before the proof is looked at.
    assert.ok(statuses.includes(429), `${rounds} junk SIWX proofs from one address were all checked: ${statuses.join(',')}`);
    assert.ok(siwxRpc <= 2 * AUTH_FAILURES, `${siwxRpc} RPC calls (eth_getCode/eth_call) for ${rounds} junk SIWX proofs`);
  });
});
