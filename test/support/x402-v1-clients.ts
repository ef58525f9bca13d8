import axios from 'axios';
import { withPaymentInterceptor, createSigner as createAxiosSigner } from 'x402-axios';
import { wrapFetchWithPayment as wrapV1Fetch, createSigner } from 'x402-fetch';
import type { FundedAccount } from '../../src/devchain/deploy.ts';

/** The gateway configuration that renders the 402 body in x402 v1 for these clients. */
export const V1_BODY = { topup: { x402v1Body: true } };

/**
 * x402-fetch 1.2.0 as its README shows it (`createSigner('base-sepolia', key)`, `wrapFetchWithPayment`),
 * with `maxValue` only when given (its default cap is 0.1 USDC), and every X-PAYMENT header it sends.
 */
export async function v1Fetch(payer: FundedAccount, maxValue?: bigint): Promise<{ fetch: typeof fetch; sent: string[] }> {
  const sent: string[] = [];
  const recording: typeof fetch = async (input, init) => {
    const xPayment = (init?.headers as Record<string, string> | undefined)?.['X-PAYMENT'];
    if (xPayment) sent.push(xPayment);
    return fetch(input, init);
  };
  const signer = await createSigner('base-sepolia', payer.privateKey);
  const paying = maxValue === undefined ? wrapV1Fetch(recording, signer as never) : wrapV1Fetch(recording, signer as never, maxValue);
  return { fetch: paying as typeof fetch, sent };
}

/** x402-axios 0.7.2 with its defaults: an axios instance whose 402s it pays. */
export async function v1Axios(payer: FundedAccount, baseURL: string) {
  const signer = await createAxiosSigner('base-sepolia', payer.privateKey);
  return withPaymentInterceptor(axios.create({ baseURL }), signer as never);
}
