import type { Services } from '../../services.ts';
import { SIGN_IN_WITH_X, siwxChallenge, siwxConfigProblem } from '../../siwe/siwx.ts';
import { bazaarDiscovery } from './bazaar-discovery.ts';
import { declarePaymentIdentifierExtension, PAYMENT_IDENTIFIER } from '@x402/extensions/payment-identifier';

/** A route's bazaar entry only changes with the configuration: built once per gateway and route. */
const bazaarCache = new WeakMap<Services, Map<string, unknown>>();
export function bazaarOf(services: Services, path: string): unknown {
  let routes = bazaarCache.get(services);
  if (!routes) bazaarCache.set(services, (routes = new Map()));
  let entry = routes.get(path);
  if (!entry) routes.set(path, (entry = bazaarDiscovery(path, services.catalog, services.config.server.publicUrl)));
  return entry;
}

/**
 * The x402 v2 `extensions` of every pay-per-request 402, built in this one place so each paid
 * endpoint (chat completions, Responses, Messages, and any later one) advertises the same things:
 * `sign-in-with-x` (spend an existing balance instead of paying: src/siwe/siwx.ts) and `bazaar`
 * (what the route takes and answers, for facilitators' discovery services: bazaar-discovery.ts)
 * and `payment-identifier` (an idempotency key for the paid request: src/payments/paid-request/identifier-hold.ts).
 */
export function paidRequestExtensions(services: Services, resourceUrl: string, path: string): Record<string, unknown> {
  return {
    bazaar: bazaarOf(services, path),
    // Optional: a paid request retried with the same id is never paid or run twice (src/payments/paid-request/identifier-hold.ts).
    [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false),
    ...siwxExtension(services, resourceUrl),
  };
}

/**
 * The `sign-in-with-x` challenge, or nothing when the configuration makes every challenge one the
 * verifier refuses (siwxConfigProblem: server.publicUrl outside siwe.domains or siwe.uris).
 */
function siwxExtension(services: Services, resourceUrl: string): Record<string, unknown> {
  const { config } = services;
  if (siwxConfigProblem(config.server.publicUrl, config.siwe)) return {};
  return {
    [SIGN_IN_WITH_X]: siwxChallenge({
      publicUrl: config.server.publicUrl,
      resourceUrl,
      chainIds: signingChains(config.siwe.chainIds, config.siwe.contractWalletChainId),
      windowSeconds: config.siwe.windowSeconds,
      secret: services.keySecret,
      now: services.now(),
    }),
  };
}

/**
 * The chains a SIWX message may name, the contract-wallet chain first: the stock x402 client extension
 * signs for the first EVM chain listed, and a contract wallet's signature counts only on that chain
 * (src/siwe/contract-wallet-chain.ts), while a key's counts on any.
 */
function signingChains(chainIds: number[], contractWalletChainId: number | null): number[] {
  return contractWalletChainId === null ? chainIds : [contractWalletChainId, ...chainIds.filter((id) => id !== contractWalletChainId)];
}
