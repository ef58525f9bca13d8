import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { decodePaymentRequiredHeader } from '@x402/core/http';
import type { PaymentRequirements } from '@x402/core/types';
import { parseUnits } from 'viem';
import { GatewayError, readJson, type GatewayClient } from './gateway-client.ts';

/**
 * Funds the wallet's balance over x402 with the stock @x402/fetch client, the way any paying client
 * would: read the 402 offer, sign one entry, send it, and wait for the chain.
 */
export type TransferMethod = 'eip3009' | 'permit2';

export type TopupEvent =
  | { phase: 'offer'; offer: PaymentRequirements }
  | { phase: 'settling' }
  | { phase: 'pending'; transaction: string | null }
  | { phase: 'credited' };

export interface TopupOptions {
  /** Prefer this transfer method when the gateway offers several (default: its first offer). */
  method?: TransferMethod;
  onProgress?: (event: TopupEvent) => void;
  /** How long to follow a payment the gateway reported as pending (default 5 minutes). */
  pendingTimeoutMs?: number;
  pollIntervalMs?: number;
}

export interface TopupResult {
  credited_usdc: number;
  /** The balance after the credit, when the gateway reported it (not after a pending wait). */
  balance_usdc: number | null;
  transaction: string | null;
  network: string;
  asset: string;
}

export async function topUp(client: GatewayClient, usd: number, opts: TopupOptions = {}): Promise<TopupResult> {
  const report = opts.onProgress ?? (() => undefined);
  const offer = chooseOffer(await readOffers(client, usd), usd, opts.method);
  report({ phase: 'offer', offer });

  const payer = new x402Client((_version, accepts) => accepts.find((r) => sameOffer(r, offer)) ?? offer);
  registerExactEvmScheme(payer, { signer: client.account });
  // The client refuses tokens it does not know, and anything above $1, unless told: allow exactly
  // the amount the user asked for, of the one asset picked here.
  payer.setSpendControls({
    maxAmountPerPayment: `$${usd}`,
    allowedAssets: [{ network: offer.network, asset: offer.asset, maxAmountPerPayment: offer.amount }],
  });
  const observed: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    if (headers.has('payment-signature') || headers.has('x-payment')) report({ phase: 'settling' });
    return fetch(input, init);
  };
  const paying = wrapFetchWithPayment(observed, payer);

  let res: Response;
  try {
    res = await paying(`${client.baseUrl}/v1/topup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ amount: usd }),
    });
  } catch (err) {
    throw new Error(`the payment could not be made: ${(err as Error).message}`);
  }
  if (res.status === 202) {
    const pending = (await res.json()) as { payment_id: number; transaction: string | null };
    report({ phase: 'pending', transaction: pending.transaction });
    const credited = await followPending(client, pending.payment_id, opts);
    report({ phase: 'credited' });
    return { credited_usdc: credited.credited_usdc, balance_usdc: null, transaction: credited.transaction, network: offer.network, asset: offer.asset };
  }
  if (res.status === 402) {
    const body = (await res.json().catch(() => ({}))) as { message?: string; reason?: string };
    throw new GatewayError(402, 'PAYMENT_REJECTED', body.message ?? 'the payment was rejected; nothing was credited', body);
  }
  const body = await readJson<{ credited_usdc: number; balance_usdc: number; transaction: string; network: string }>(res);
  report({ phase: 'credited' });
  return { credited_usdc: body.credited_usdc, balance_usdc: body.balance_usdc, transaction: body.transaction, network: body.network, asset: offer.asset };
}

/**
 * The gateway's 402 answer for this amount: what it accepts. Anything else is its error. Read from
 * the PAYMENT-REQUIRED header, always x402 v2 (the client this module drives is v2): the body is an
 * x402 v1 offer, without Permit2 entries or CAIP-2 networks, when the operator set topup.x402v1Body.
 */
async function readOffers(client: GatewayClient, usd: number): Promise<PaymentRequirements[]> {
  const res = await client.send('POST', '/v1/topup', { amount: usd });
  if (res.status !== 402) {
    await readJson(res);
    throw new GatewayError(res.status, 'NO_OFFER', `the gateway answered ${res.status} instead of a payment offer`, null);
  }
  const body = (await res.json().catch(() => null)) as { accepts?: PaymentRequirements[] } | null;
  const header = res.headers.get('payment-required');
  const accepts = header ? (decodePaymentRequiredHeader(header) as { accepts?: PaymentRequirements[] }).accepts : body?.accepts;
  if (!Array.isArray(accepts) || accepts.length === 0) throw new GatewayError(402, 'NO_OFFER', 'the gateway offers no way to pay', body);
  return accepts;
}

/**
 * Picks the offer to sign and checks that it asks for exactly `usd` in the token's units, so a
 * misconfigured or hostile gateway cannot make the wallet sign for more than the user typed.
 */
export function chooseOffer(accepts: PaymentRequirements[], usd: number, method?: TransferMethod): PaymentRequirements {
  const offer = method ? accepts.find((r) => (r.extra?.assetTransferMethod ?? 'eip3009') === method) : accepts[0];
  if (!offer) {
    const methods = accepts.map((r) => r.extra?.assetTransferMethod ?? 'eip3009').join(', ');
    throw new GatewayError(402, 'NO_OFFER', `the gateway does not accept ${method} payments (it offers: ${methods})`, null);
  }
  const decimals = offer.extra?.decimals;
  if (typeof decimals !== 'number')
    throw new GatewayError(
      402,
      'NO_OFFER',
      `the offer for ${offer.asset} does not state its decimals; refusing to sign an amount that cannot be checked`,
      null,
    );
  const expected = parseUnits(String(usd), decimals).toString();
  if (offer.amount !== expected) {
    throw new GatewayError(
      402,
      'NO_OFFER',
      `the gateway asks for ${offer.amount} units of ${offer.asset} for $${usd} (expected ${expected}); refusing to sign`,
      null,
    );
  }
  return offer;
}

function sameOffer(a: PaymentRequirements, b: PaymentRequirements): boolean {
  return a.network === b.network && a.asset.toLowerCase() === b.asset.toLowerCase() && a.amount === b.amount;
}

/** Polls the top-up history until the payment is credited, or has failed (it leaves the history). */
async function followPending(client: GatewayClient, paymentId: number, opts: TopupOptions) {
  const deadline = Date.now() + (opts.pendingTimeoutMs ?? 300_000);
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, opts.pollIntervalMs ?? 2_000));
    const entry = (await client.topups()).find((t) => t.id === paymentId);
    if (!entry) throw new GatewayError(402, 'PAYMENT_FAILED', `payment ${paymentId} failed on chain and was not credited; you may pay again`, null);
    if (entry.status === 'credited') return entry;
  }
  throw new GatewayError(
    202,
    'STILL_PENDING',
    `payment ${paymentId} is still pending; it will be credited when it settles (check with: tollgate wallet topups). Do not pay again`,
    null,
  );
}
