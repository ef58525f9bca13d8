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
      chainIds: config.siwe.chainIds,
      windowSeconds: config.siwe.windowSeconds,
      secret: services.keySecret,
      now: services.now(),
    }),
  };
}
