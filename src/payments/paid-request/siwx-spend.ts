import type { FastifyReply, FastifyRequest } from 'fastify';
import { getBalance } from '../../ledger/balances.ts';
import { payPerRequestKey } from '../pay-per-request/wallet-key.ts';
import { ApiError } from '../../refusal.ts';
import type { Services } from '../../services.ts';
import { SIGN_IN_WITH_X, siwxConfigProblem, verifySiwxHeader } from '../../siwe/siwx.ts';
import { authFailureLimit } from '../../http/auth/auth-failure-limit.ts';
import { reservationRefusal } from '../../http/auth/key-checks.ts';
import { enforceRateLimit } from '../../http/rate-limit.ts';
import type { PaidRequest } from './paid-request.ts';
import type { AskForPayment } from '../../http/x402/payment-wire.ts';

/** The `sign-in-with-x` header (x402's SIWX extension); undefined when none was sent. */
export function siwxHeader(headers: Record<string, string | string[] | undefined>): string | undefined {
  const value = headers[SIGN_IN_WITH_X];
  if (Array.isArray(value)) throw new ApiError(400, 'VALIDATION_ERROR', 'send exactly one sign-in-with-x header');
  return value;
}

/**
 * A keyless request that answers a 402 with a signed `sign-in-with-x` message instead of a payment:
 * once the signature is verified (and its nonce used up), the request runs billed to the signer's
 * balance exactly as a keyed request of that wallet (the same reservation, settle and rate-limit
 * window), recorded under the wallet's pay-per-request key. Every refusal but an RPC outage is the
 * 402 again, with a fresh challenge and the offers, so the stock client can sign again or pay,
 * until the client's address has failed too often (auth-failure-limit.ts): then the 429.
 */
export async function spendWithSiwx(services: Services, request: FastifyRequest, reply: FastifyReply, paid: PaidRequest, header: string, ask: AskForPayment): Promise<FastifyReply> {
  // No challenge is offered when none could pass the verifier (the operator is warned at start-up);
  // the client is told so rather than asked to sign a challenge that is not there.
  if (siwxConfigProblem(services.config.server.publicUrl, services.config.siwe)) {
    const why = 'its configuration leaves its own public URL out of the domains it verifies';
    return ask('SIWX_REJECTED', `this gateway offers no sign-in-with-x (${why}); nothing was charged; pay one of accepts`);
  }
  // A refused proof is a failed authentication like a junk SIWE proof (the same signature check and
  // contract-wallet RPC calls): counted per client address, and a blocked address is refused with
  // the 429 before its header is looked at. Under the limit, a refusal is the 402 again.
  const verified = await authFailureLimit(services).check(
    request,
    () => verifySiwxHeader(header, paid.path, { siwe: services.siwe, secret: services.keySecret }),
    (result) => !result.ok && result.status === 401,
  );
  if (!verified.ok) {
    if (verified.status === 503) throw new ApiError(503, 'SERVICE_UNAVAILABLE', verified.reason, {}, { 'retry-after': '5' });
    return ask('SIWX_REJECTED', `${verified.reason}; nothing was charged and the request did not run. Sign this 402's sign-in-with-x challenge, or pay one of accepts`);
  }
  const { wallet } = verified;
  // Counted once the signer is known: a forged header must not use up a wallet's window.
  await enforceRateLimit(services, reply, `chat:${wallet}`, services.rateWindows.chat);
  const balance = await getBalance(services.storage.db, wallet);
  if (balance.balance_usdc <= 0) {
    return ask('PAYMENT_REQUIRED', `${wallet} has no balance at this gateway, so sign-in-with-x cannot pay for this request; pay one of accepts (what the request does not use stays as a balance that sign-in-with-x can spend later)`);
  }
  const key = await payPerRequestKey(services.storage.db, wallet);
  const ran = await paid.run(key, {});
  if (ran.ok) return reply;
  const refusal = await reservationRefusal(services, key, paid.plan, ran, paid.shrink);
  return ask(refusal.code, `${refusal.message}; or pay this request with one of accepts`, refusal.extra);
}
