import { appendPaymentIdentifierToExtensions } from '@x402/extensions/payment-identifier';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import type { FundedAccount } from '../../src/devchain/deploy.ts';
import type { TopupHarness } from './topup-harness.ts';

/** The stock exact client of `payer` for the dev chain's USDC, up to $1 a payment. */
export function exactUsdcClient(h: Pick<TopupHarness, 'chain'>, payer: FundedAccount): x402Client {
  const client = new x402Client();
  registerExactEvmScheme(client, { signer: payer });
  client.setSpendControls({ maxAmountPerPayment: '$1', allowedAssets: [{ network: h.chain.network, asset: h.chain.usdc, maxAmountPerPayment: '1000000' }] });
  return client;
}

/**
 * A fetch paying with the stock @x402/fetch `client`, putting `id` in every payment it signs (the
 * package's helper, from a before-payment hook), and recording in `sent` the payment headers it sends.
 */
export function payingWithIdentifier(client: x402Client, id: string, sent: string[] = []): typeof fetch {
  client.onBeforePaymentCreation(async ({ paymentRequired }) => {
    appendPaymentIdentifierToExtensions(paymentRequired.extensions ?? {}, id);
  });
  const recording: typeof fetch = async (input, init) => {
    const header = (input instanceof Request ? input.headers : new Headers(init?.headers)).get('payment-signature');
    if (header) sent.push(header);
    return fetch(input, init);
  };
  return wrapFetchWithPayment(recording, client) as typeof fetch;
}
