import type { PaymentRequired, PaymentRequirements } from '@x402/core/types';
import type { Config, OfferConfig } from '../config/schema.ts';
import { badRequest } from '../refusal.ts';
import { usdToMicro } from '../ledger/usd.ts';

/**
 * The operator's offers rendered for one requested amount. The same list builds the 402 body, the
 * PAYMENT-REQUIRED header, and the requirement a paid request is matched against, so what the
 * server checks is always what it offered, never what the client echoes back.
 */
export interface Offer {
  config: OfferConfig;
  requirements: PaymentRequirements & { maxAmountRequired: string };
}

/** Parses the request body's `amount` (USD, a JSON number) into micro-USDC, or throws a 400. */
export function parseTopupAmount(body: unknown, limits: Config['topup']): number {
  const amount = typeof body === 'object' && body !== null ? (body as Record<string, unknown>).amount : undefined;
  if (amount === undefined) throw badRequest('amount is required: send {"amount": <USD>}, for example {"amount": 5}');
  if (typeof amount !== 'number' || !Number.isFinite(amount)) {
    throw badRequest('amount must be a JSON number of USD, for example {"amount": 5}, not a string');
  }
  if (amount < limits.minUsd) throw badRequest(`amount must be at least ${limits.minUsd} USD`, { min_usd: limits.minUsd });
  if (amount > limits.maxUsd) throw badRequest(`amount must be at most ${limits.maxUsd} USD`, { max_usd: limits.maxUsd });
  try {
    return usdToMicro(String(amount));
  } catch {
    throw badRequest('amount must have at most 6 decimals (1 micro-USD)');
  }
}

/** The token amount, in the asset's smallest unit, for `micro` micro-USD (1 token = 1 USD). */
export function atomicAmount(micro: number, decimals: number): bigint {
  return BigInt(micro) * 10n ** BigInt(decimals - 6);
}

export function buildOffers(topup: Config['topup'], micro: number): Offer[] {
  return topup.offers.map((config) => {
    const amount = atomicAmount(micro, config.decimals).toString();
    return {
      config,
      requirements: {
        scheme: 'exact',
        network: config.network as PaymentRequirements['network'],
        amount,
        maxAmountRequired: amount,
        asset: config.asset,
        payTo: topup.payTo!,
        maxTimeoutSeconds: topup.maxTimeoutSeconds,
        extra: { assetTransferMethod: config.transferMethod, name: config.name, version: config.version, decimals: config.decimals },
      },
    };
  });
}

/**
 * x402 `upto` entries for `micro` micro-USD, one per offer paid through Permit2 (the upto scheme has
 * no EIP-3009 form) whose network has an upto facilitator: the payer signs at most this amount, for a witness that only
 * `facilitatorAddress` may settle and only to payTo; the gateway settles the request's charge.
 */
export function buildUptoOffers(topup: Config['topup'], micro: number, facilitatorFor: (network: string) => string | undefined): Offer[] {
  return buildOffers(topup, micro).flatMap(({ config, requirements }) => {
    const facilitatorAddress = facilitatorFor(config.network);
    if (config.transferMethod !== 'permit2' || facilitatorAddress === undefined) return [];
    return [
      {
        config,
        requirements: { ...requirements, scheme: 'upto', extra: { facilitatorAddress, name: config.name, version: config.version, decimals: config.decimals } },
      },
    ];
  });
}

export const TOPUP_DESCRIPTION = 'Prepaid balance for Tollgate inference';

export function paymentRequired(resourceUrl: string, offers: Offer[], error: string, description = TOPUP_DESCRIPTION): PaymentRequired & { x402Version: 2 } {
  return {
    x402Version: 2,
    error,
    resource: { url: resourceUrl, description, mimeType: 'application/json' },
    accepts: offers.map((o) => o.requirements),
  };
}
