import assert from 'node:assert/strict';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import { createSIWxPayload, encodeSIWxHeader, type SIWxExtension } from '@x402/extensions/sign-in-with-x';
import { getAddress } from 'viem';
import { freePort } from '../../src/devchain/ports.ts';
import { startPayPerRequestHarness, type PayPerRequestHarness } from './pay-per-request-harness.ts';
import { jsonRpcProxy } from './rpc-proxy.ts';
import { newAccount } from './siwe.ts';
import { devChain } from './topup-harness.ts';

const BODY = { model: 'fake/chat-small', messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 100 };

/** A pay-per-request gateway whose contract-wallet RPC calls are recorded, for attacks with junk sign-in proofs. */
export interface SiwxJunkHarness {
  h: PayPerRequestHarness;
  /** The JSON-RPC methods the gateway called, in order. */
  rpcCalls: string[];
  /** A chat request with no key, with `headers`. */
  post(headers?: Record<string, string>): Promise<Response>;
  /** A sign-in-with-x header built by the stock helpers on a fresh 402 challenge, signed by a throwaway key, naming `claimed`. */
  junkNaming(claimed: string, signature?: `0x${string}`): Promise<string>;
  stop(): Promise<void>;
}

export async function startSiwxJunkHarness(authFailuresPerMinute: number): Promise<SiwxJunkHarness> {
  const rpcCalls: string[] = [];
  const { anvil } = await devChain();
  const proxy = await jsonRpcProxy(anvil.rpcUrl, (c) => {
    rpcCalls.push(String(c.method));
    return false;
  });
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const h = await startPayPerRequestHarness('sqlite', {
    config: {
      server: { port, publicUrl: origin },
      chains: { [String(anvil.chainId)]: { rpcUrl: proxy.url } },
      rateLimits: { authFailures: { perMinute: authFailuresPerMinute } },
    },
  });
  const url = `${origin}/v1/chat/completions`;
  const post = (headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(BODY) });
  return {
    h,
    rpcCalls,
    post,
    async junkNaming(claimed, signature) {
      const res = await post();
      assert.equal(res.status, 402);
      const required = decodePaymentRequiredHeader(res.headers.get('payment-required')!);
      const ext = required.extensions!['sign-in-with-x'] as SIWxExtension;
      const payload = await createSIWxPayload({ ...ext.info, chainId: `eip155:${h.anvil.chainId}`, type: 'eip191' }, newAccount(), url);
      return encodeSIWxHeader({ ...payload, address: getAddress(claimed), ...(signature ? { signature } : {}) });
    },
    async stop() {
      await h.gw.assertLedger();
      await h.stop();
      await proxy.close();
    },
  };
}
