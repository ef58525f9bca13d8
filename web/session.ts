import { createSiweMessage, generateSiweNonce } from 'viem/siwe';
import { getAddress, stringToHex } from 'viem';
import { expectOk, type SiweInfo } from './api.ts';
import type { Eip1193 } from './wallet.ts';

export interface Session {
  token: string;
  wallet: string;
  expiresAt: number;
}

/**
 * Sign in once: a SIWE message for this gateway (domain, uri and chain from GET /v1/auth/siwe),
 * signed with personal_sign, exchanged for a dashboard session. The message says in words what the
 * signature does, and nothing more: it opens a session; it moves no money.
 */
export async function signIn(provider: Eip1193, address: string, walletChainId: number, minutes: number): Promise<Session> {
  const info = await expectOk<SiweInfo>('GET', '/v1/auth/siwe');
  const chainId = info.chain_ids.includes(walletChainId) ? walletChainId : info.chain_ids[0]!;
  const message = createSiweMessage({
    domain: info.domain,
    address: getAddress(address),
    statement: `Sign in to the Tollgate dashboard for ${minutes} minutes. This signature moves no money.`,
    uri: info.uri,
    version: '1',
    chainId,
    nonce: generateSiweNonce(),
    issuedAt: new Date(),
  });
  const signature = (await provider.request({ method: 'personal_sign', params: [stringToHex(message), address] })) as string;
  const body = await expectOk<{ token: string; wallet: string; expires_at: string }>('POST', '/v1/auth/session', { body: { message, signature } });
  return { token: body.token, wallet: body.wallet, expiresAt: Date.parse(body.expires_at) };
}

export function signOut(session: Session): Promise<unknown> {
  return expectOk('DELETE', '/v1/auth/session', { session: session.token }).catch(() => undefined);
}
