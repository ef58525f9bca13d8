import { expectOk } from './api.ts';
import { signProof } from './proof.ts';
import type { Eip1193 } from './wallet.ts';

export interface Session {
  token: string;
  wallet: string;
  expiresAt: number;
}

/**
 * Sign in once: a proof signed for the "sign-in" action, exchanged for a dashboard session. Its
 * statement says what the session may do (read, list, revoke and tighten keys) and that it cannot
 * create a key or loosen one: those ask the wallet again (web/proof.ts).
 */
export async function signIn(provider: Eip1193, address: string, walletChainId: number): Promise<Session> {
  const proof = await signProof(provider, address, walletChainId, 'sign-in');
  const body = await expectOk<{ token: string; wallet: string; expires_at: string }>('POST', '/v1/auth/session', { body: proof });
  return { token: body.token, wallet: body.wallet, expiresAt: Date.parse(body.expires_at) };
}

export function signOut(session: Session): Promise<unknown> {
  return expectOk('DELETE', '/v1/auth/session', { session: session.token }).catch(() => undefined);
}
