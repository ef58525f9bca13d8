import { ApiFailure, expectOk } from './api.ts';
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

/**
 * Ends every session of the wallet, this one included (DELETE /v1/auth/sessions): how the owner ends
 * one they no longer hold (a tab left open elsewhere, a token seen on a shared screen). Resolves with
 * how many ended. Unlike signOut, a failure is thrown: the person pressed it to shut someone out, so
 * the page must say when that may not have happened (signOutEverywhereProblem).
 */
export async function signOutEverywhere(session: Session): Promise<number> {
  const body = await expectOk<{ revoked: number }>('DELETE', '/v1/auth/sessions', { session: session.token });
  return body.revoked;
}

/**
 * What a failed "Sign out everywhere" means for the person, and what to do. A 401 is this session
 * having ended first (expired, or ended from another tab), which ends no other: only a fresh one can.
 */
export function signOutEverywhereProblem(err: unknown): string {
  const status = err instanceof ApiFailure ? err.status : 0;
  if (status === 401) return 'This session had already ended, so it could not end any other. Sign in again, then press Sign out everywhere.';
  if (status === 0) return 'The gateway could not be reached, so your sessions may still be open. Check your connection and press Sign out everywhere again.';
  if (status >= 500)
    return `The gateway could not end the sessions (it answered ${status}), so they may still be open. Press Sign out everywhere again in a minute.`;
  return `${(err as Error).message} Your sessions may still be open: press Sign out everywhere again.`;
}
