import type { Hex } from 'viem';

/**
 * What `tollgate wallet` reads from the environment. The private key is only ever taken from here:
 * a command-line flag would end up in shell history and in `ps` output for every user to see.
 */
export const WALLET_KEY_ENV = 'TOLLGATE_WALLET_KEY';
export const GATEWAY_URL_ENV = 'TOLLGATE_URL';
export const DEFAULT_GATEWAY_URL = 'http://localhost:8080';
/** The SIWE domain to sign for when the gateway's URL is not its public one (src/gateway-client/gateway-client.ts, signingTarget). */
export const SIWE_DOMAIN_ENV = 'TOLLGATE_SIWE_DOMAIN';

export type WalletEnv = { ok: true; privateKey: Hex; gatewayUrl: string | undefined; siweDomain: string | undefined } | { ok: false; problem: string };

export function walletEnv(env: NodeJS.ProcessEnv = process.env): WalletEnv {
  const raw = env[WALLET_KEY_ENV]?.trim();
  if (!raw) return { ok: false, problem: `set ${WALLET_KEY_ENV} to the wallet's private key (0x + 64 hex digits); it is never taken from a flag` };
  const key = raw.startsWith('0x') ? raw : `0x${raw}`;
  if (!/^0x[0-9a-fA-F]{64}$/.test(key)) return { ok: false, problem: `${WALLET_KEY_ENV} is not a private key: expected 0x followed by 64 hex digits` };
  return {
    ok: true,
    privateKey: key as Hex,
    gatewayUrl: env[GATEWAY_URL_ENV]?.trim() || undefined,
    siweDomain: env[SIWE_DOMAIN_ENV]?.trim() || undefined,
  };
}
