import OpenAI from 'openai';
import type { FundedAccount } from '../../src/devchain/deploy.ts';
import type { PayPerRequestHarness } from './pay-per-request-harness.ts';

/**
 * The stock `openai` SDK over the stock `@x402/fetch` client with the sign-in-with-x client
 * extension, as an agent holding `payer`'s key sets it up: it signs a 402's sign-in-with-x
 * challenge when offered and its balance can pay, and pays (exact, up to $1) otherwise.
 */
export async function siwxPayingOpenai(h: PayPerRequestHarness, origin: string, payer: FundedAccount): Promise<OpenAI> {
  const { x402Client, wrapFetchWithPayment } = await import('@x402/fetch');
  const { registerExactEvmScheme } = await import('@x402/evm/exact/client');
  const { createSIWxClientExtension } = await import('@x402/extensions/sign-in-with-x');
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: payer });
  client.registerExtension(createSIWxClientExtension({ signers: [payer] }));
  const usdc = { network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000000' };
  client.setSpendControls({ maxAmountPerPayment: '$1', allowedAssets: [usdc] });
  const paying = wrapFetchWithPayment(fetch, client) as typeof fetch;
  return new OpenAI({ baseURL: `${origin}/v1`, apiKey: 'unused', defaultHeaders: { Authorization: null }, fetch: paying, maxRetries: 0 });
}
