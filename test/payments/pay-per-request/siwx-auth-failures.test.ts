import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { createSIWxPayload, encodeSIWxHeader, type SIWxExtension } from '@x402/extensions/sign-in-with-x';
import { getAddress } from 'viem';
import { freePort } from '../../../src/devchain/ports.ts';
import { call } from '../../support/gateway.ts';
import { jsonRpcProxy, type RunningProxy } from '../../support/rpc-proxy.ts';
import { newAccount, siweProof } from '../../support/siwe.ts';
import { devChain } from '../../support/topup-harness.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from '../../support/pay-per-request-harness.ts';

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
const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

describe('attack: junk sign-in-with-x proofs are not counted as failed authentications (rateLimits.authFailures)', () => {
  let h: PayPerRequestHarness;
  let origin: string;
  let proxy: RunningProxy;
  const rpcCalls: string[] = [];
  before(async () => {
    const { anvil } = await devChain();
    proxy = await jsonRpcProxy(anvil.rpcUrl, (c) => {
      rpcCalls.push(String(c.method));
      return false;
    });
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    h = await startPayPerRequestHarness('sqlite', {
      config: {
        server: { port, publicUrl: origin },
        chains: { [String(anvil.chainId)]: { rpcUrl: proxy.url } },
        rateLimits: { authFailures: { perMinute: AUTH_FAILURES } },
      },
    });
  });
  after(async () => {
    await h.gw.assertLedger();
    await h.stop();
    await proxy.close();
  });

  const url = () => `${origin}/v1/chat/completions`;
  const post = (headers: Record<string, string> = {}) =>
    fetch(url(), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(BODY) });

  /**
   * A SIWX header built by the stock helpers on a fresh 402 challenge, signed by a throwaway key but
   * naming `claimed` (a contract on the contract-wallet chain).
   */
  async function junkNaming(claimed: string): Promise<string> {
    const res = await post();
    assert.equal(res.status, 402);
    const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
    const ext = required.extensions!['sign-in-with-x'] as SIWxExtension;
    const payload = await createSIWxPayload({ ...ext.info, chainId: `eip155:${h.anvil.chainId}`, type: 'eip191' }, newAccount(), url());
    return encodeSIWxHeader({ ...payload, address: getAddress(claimed) });
  }

  test('a SIWE junk proof is blocked after authFailures; a junk SIWX proof from the same address is checked (with RPC calls) every time', async () => {
    // The control: SIWE junk proofs from this address are blocked after AUTH_FAILURES.
    const siweStatuses: number[] = [];
    for (let i = 0; i < AUTH_FAILURES + 1; i++) {
      const junk = { ...(await siweProof(newAccount())), signature: `0x${'11'.repeat(65)}` };
      siweStatuses.push((await call(h.gw.url, 'POST', '/v1/auth/keys', junk)).status);
    }
    assert.equal(siweStatuses.at(-1), 429, `SIWE junk is limited: ${siweStatuses}`);
    // This address is now blocked for every credential the failure limit guards; SIWX is not one of them.

    const rounds = 4 * AUTH_FAILURES;
    const statuses: number[] = [];
    const before = rpcCalls.length;
    for (let i = 0; i < rounds; i++) {
      // The USDC contract: code on the contract-wallet chain, so every check asks the RPC.
      const res = await post({ 'sign-in-with-x': await junkNaming(h.chain.usdc) });
      statuses.push(res.status);
    }
    const siwxRpc = rpcCalls.slice(before).filter((m) => m === 'eth_getCode' || m === 'eth_call').length;
    // What the failed-authentication limit asks of every proof: after authFailures, a 429 before the proof is looked at.
    assert.ok(statuses.includes(429), `${rounds} junk SIWX proofs from one address were all checked: ${statuses.join(',')}`);
    assert.ok(siwxRpc <= 2 * AUTH_FAILURES, `${siwxRpc} RPC calls (eth_getCode/eth_call) for ${rounds} junk SIWX proofs`);
  });
});
