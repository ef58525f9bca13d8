import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { openSession, revokeSession, revokeWalletSessions } from '../../sessions/store.ts';
import type { Services } from '../../services.ts';
import { clientBucket } from '../client-bucket.ts';
import { unauthorized } from '../../refusal.ts';
import { enforceRateLimit } from '../rate-limit.ts';
import { requireSiwe, siweProofFields } from '../auth/siwe-proof.ts';
import { parseInput } from '../validate.ts';
import { requireSession, sessionToken } from '../auth/wallet-auth.ts';

const proofBody = z.object(siweProofFields);

/**
 * POST /v1/auth/session: one SIWE proof (single use, like every proof) opens a dashboard session,
 * a bearer token for usage and top-up history and for listing, revoking and tightening keys; never
 * for chat, creating a key or loosening one (src/siwe/actions.ts). No cookie, so a
 * cross-site page can never ride on it (no CSRF). DELETE ends the session the request carries;
 * DELETE /v1/auth/sessions ends every session of its wallet (the owner opens a fresh one to end one
 * it no longer holds: a token seen on a shared screen, or leaked).
 */
export function sessionRoutes(app: FastifyInstance, services: Services): void {
  const lifetimeMs = services.config.dashboard.sessionMinutes * 60_000;

  app.post('/v1/auth/session', async (request, reply) => {
    const body = parseInput(proofBody, request.body);
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    // Only a proof signed with the sign-in statement opens a session (src/siwe/actions.ts).
    const { wallet } = await requireSiwe(services, request, body, 'open-session');
    await enforceRateLimit(services, reply, `keys:${wallet}`, services.rateWindows.keys);
    const session = await openSession(services.storage.db, services.keySecret, wallet, lifetimeMs, services.now());
    return reply.code(201).send({
      token: session.token,
      wallet,
      expires_at: new Date(session.expiresAt).toISOString(),
      expires_in: Math.floor(lifetimeMs / 1000),
    });
  });

  app.delete('/v1/auth/session', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const token = sessionToken(request);
    if (token === null) throw unauthorized('send the session to end in "Authorization: Bearer ses-…"');
    if (!(await revokeSession(services.storage.db, services.keySecret, token, services.now()))) {
      throw unauthorized('the dashboard session is invalid, expired or already ended');
    }
    return { revoked: true };
  });

  app.delete('/v1/auth/sessions', async (request, reply) => {
    await enforceRateLimit(services, reply, `ip:${clientBucket(request.ip)}`, services.rateWindows.public);
    const token = sessionToken(request);
    if (token === null) throw unauthorized('send one of the wallet\'s live sessions in "Authorization: Bearer ses-…" (open one with POST /v1/auth/session)');
    // Counted by the failed-authentication limit like any session: tokens cannot be guessed here either.
    const wallet = await requireSession(services, request, token);
    return { revoked: await revokeWalletSessions(services.storage.db, wallet, services.now()), wallet };
  });
}
