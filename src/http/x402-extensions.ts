import type { InboundTranslator } from '../protocols/inbound.ts';
import type { Services } from '../services.ts';
import { SIGN_IN_WITH_X, siwxChallenge } from '../siwe/siwx.ts';

/**
 * The x402 v2 `extensions` of every pay-per-request 402, built in this one place so each paid
 * endpoint (chat completions, Responses, Messages, and any later one) advertises the same things:
 * `sign-in-with-x` (spend an existing balance instead of paying: src/siwe/siwx.ts).
 */
export function paidRequestExtensions(services: Services, resourceUrl: string, _inbound: InboundTranslator): Record<string, unknown> {
  const { config } = services;
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
