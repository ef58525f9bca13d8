import { reservationRefusal } from '../../metered/reservation-refusal.ts';
import { getBalance } from '../../ledger/balances.ts';
import { payPerRequestKey } from '../pay-per-request/wallet-key.ts';
import type { PaidRequestDeps } from './deps.ts';
import type { AskForPayment, PaidOutcome, PayCode } from './outcome.ts';
import type { PaidRequest } from './paid-request.ts';

/**
 * A keyless request that answers a 402 with a signed `sign-in-with-x` message instead of a payment:
 * once the signature is verified (and its nonce used up), the request runs billed to the signer's
 * balance exactly as a keyed request of that wallet (the same reservation, settle and rate-limit
 * window), recorded under the wallet's pay-per-request key. Every refusal but an RPC outage is the
 * 402 again, with a fresh challenge and the offers, so the stock client can sign again or pay,
 * until the client's address has failed too often (src/http/auth/auth-failure-limit.ts): then the 429.
 */
export async function spendWithSiwx(deps: PaidRequestDeps, paid: PaidRequest, header: string, ask: AskForPayment): Promise<PaidOutcome> {
  // No challenge is offered when none could pass the verifier (the operator is warned at start-up);
  // the client is told so rather than asked to sign a challenge that is not there.
  if (!deps.siwxOffered) {
    const why = 'its configuration leaves its own public URL out of the domains it verifies';
    return ask('SIWX_REJECTED', `this gateway offers no sign-in-with-x (${why}); nothing was charged; pay one of accepts`);
  }
  // A refused proof is a failed authentication like a junk SIWE proof (the same signature check and
  // contract-wallet RPC calls): counted per client address, and a blocked address is refused with
  // the 429 before its header is looked at. Under the limit, a refusal is the 402 again.
  const verified = await deps.verifySiwx(header, paid.path);
  if (!verified.ok) {
    if (verified.status === 503) return { kind: 'siwx-unavailable', reason: verified.reason };
    return ask(
      'SIWX_REJECTED',
      `${verified.reason}; nothing was charged and the request did not run. Sign this 402's sign-in-with-x challenge, or pay one of accepts`,
    );
  }
  const { wallet } = verified;
  // Counted once the signer is known: a forged header must not use up a wallet's window.
  await deps.countRequest(wallet);
  const balance = await getBalance(deps.db, wallet);
  if (balance.balance_usdc <= 0) {
    return ask(
      'PAYMENT_REQUIRED',
      `${wallet} has no balance at this gateway, so sign-in-with-x cannot pay for this request; pay one of accepts (what the request does not use stays as a balance that sign-in-with-x can spend later)`,
    );
  }
  const key = await payPerRequestKey(deps.db, wallet);
  const ran = await paid.run(key, {});
  if (ran.ok) return { kind: 'ran' };
  const refusal = await reservationRefusal(deps.db, key, paid.plan, ran, paid.shrink);
  // The reservation's own refusal (INSUFFICIENT_BALANCE or KEY_LIMIT_EXCEEDED), with the offers to pay instead.
  return ask(refusal.code as PayCode, `${refusal.message}; or pay this request with one of accepts`, refusal.extra);
}
