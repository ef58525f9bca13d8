import { isTransportError } from '../../chain/rpc-errors.ts';
import { FacilitatorUnavailable } from '../facilitator/facilitator.ts';
import type { MatchedPayment } from '../match.ts';
import { openPayment, recordedForGood } from '../payment-store.ts';
import { payPerRequestKey } from '../pay-per-request/wallet-key.ts';
import { openUptoRefusal, uptoDeadlineProblem, uptoDeadlineTooFar, uptoMinRunSeconds, uptoRunUntil, type RefusalClock } from '../upto/admission.ts';
import { settleUpto, type UptoSettleDeps } from '../upto/settle-upto.ts';
import { holdMaximum, openUptoOf, uptoHoldWallet } from '../upto/upto-store.ts';
import type { PaidRequestDeps } from './deps.ts';
import type { IdentifierHold } from './identifier-hold.ts';
import type { AskForPayment, PaidOutcome } from './outcome.ts';
import type { PaidRequest } from './paid-request.ts';

/** setTimeout's largest delay; a later deadline (a payer may sign years ahead) is beyond any request. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What the pay-per-request entry hands the upto path: the request as planned, its matched payment, and its 402. */
export interface UptoCall {
  paidRequest: PaidRequest;
  matched: MatchedPayment;
  ask: AskForPayment;
  /** The least a request that is charged anything pays (offer.ts, uptoMinChargeUsdc). */
  minChargeUsdc: number;
  /** The payment's `payment-identifier` claim, if it carries one (identifier-hold.ts); the caller frees it. */
  identifier: IdentifierHold | undefined;
}

/**
 * The clock of an UPTO_UNSETTLED refusal: what-restores.ts says when the reconciler tries again (a
 * pass every reconcileIntervalSeconds takes payments untouched for settleWaitSeconds).
 */
export const uptoRefusalClock = (deps: Pick<PaidRequestDeps, 'now' | 'config'>): RefusalClock => ({
  nowMs: deps.now(),
  retryEverySeconds: deps.config.topup.reconcileIntervalSeconds + deps.config.topup.settleWaitSeconds,
});

/**
 * A pay-per-request call paid with x402 `upto` (payPerRequest.upto): the payer signed a Permit2
 * maximum equal to the request's reservation. It is verified (nothing recorded before), recorded,
 * its maximum held in the payer's hold wallet (payments/upto/upto-store.ts), the request runs
 * against that hold like any pay-per-request call, and once its bill is finished (a JSON answer
 * sent, a stream ended, a provider failure voided) exactly its charge is settled on chain: after
 * the answer, so the client never waits for the chain. What is not charged is never taken.
 */
export async function payWithUpto(deps: PaidRequestDeps, { paidRequest, matched, ask, minChargeUsdc, identifier }: UptoCall): Promise<PaidOutcome> {
  const { topup, db } = deps;
  const { payer, network, validBefore } = matched.identity;
  const runUntil = uptoRunUntil(validBefore, deps.config.topup.settleWaitSeconds, deps.config.chat.drainTimeoutSeconds);
  const minRun = uptoMinRunSeconds(paidRequest.plan.stream, deps.config.chat.firstByteTimeoutSeconds);
  const late = uptoDeadlineProblem(runUntil, deps.now(), validBefore, minRun);
  if (late) return ask('PAYMENT_EXPIRED', late);
  const far = uptoDeadlineTooFar(deps.now(), validBefore, deps.config.topup.maxTimeoutSeconds);
  if (far) return ask('PAYMENT_REJECTED', far);
  await topup.admitPayer(matched);

  let fromBlock: number;
  let verified;
  try {
    fromBlock = Number(await topup.clientFor(network)!.getBlockNumber());
    verified = await topup.facilitator.verify(matched.payload, matched.requirements);
  } catch (err) {
    if (err instanceof FacilitatorUnavailable || isTransportError(err))
      return { kind: 'facilitator-unavailable', reason: 'the payment facilitator or the chain is unavailable' };
    throw err;
  }
  // Verified before anything is recorded: nothing moves until the settle, so an unverified upto
  // payment has nothing to be credited for, and a forged one records nothing.
  if (!verified.isValid) {
    const reason = verified.invalidReason ?? 'payment rejected by the facilitator';
    return ask(
      'PAYMENT_REJECTED',
      `the upto payment was rejected (${reason}); nothing was recorded and the request did not run. Sign a new payment for one of accepts`,
      { reason },
    );
  }
  // Only now, the payer known to have signed, may the answer say anything of the wallet's upto
  // state or its identifiers. The identifier first: a retry that signed a new authorization while
  // its first request still runs must learn of that request, not be told to send again once it
  // has finished (which would run it twice). Then the open payment: a clear refusal; the unique
  // index of migration 013 is what enforces it (holdMaximum).
  await identifier?.claim();
  const open = await openUptoOf(db, payer);
  if (open) throw openUptoRefusal(open, uptoRefusalClock(deps));
  // An authorization already recorded runs nothing (openPayment below would refuse it too): refused
  // before the wallet's window is counted. One settled for 0 sent nothing, so Permit2's nonce is
  // unspent and it still verifies: whoever holds its header could otherwise use up the window the
  // payer's API keys share, until its deadline.
  const used = await recordedForGood(db, matched.identity);
  if (used) return authorizationUsed(used.id, ask);
  await deps.countRequest(payer);

  // Log searches for this authorization start 5,000 blocks back, as for exact (settle-topup.ts).
  const opened = await openPayment(db, matched, Math.max(0, fromBlock - 5_000), deps.now());
  if (opened.kind !== 'claimed') return authorizationUsed(opened.row.id, ask);
  const held = await holdMaximum(db, opened.row.id, matched.payload, deps.now());
  if (held.kind === 'busy') {
    const other = await openUptoOf(db, payer);
    if (other) throw openUptoRefusal(other, uptoRefusalClock(deps));
    return { kind: 'facilitator-unavailable', reason: 'another upto payment of this wallet was finishing' };
  }
  const key = await payPerRequestKey(db, uptoHoldWallet(payer));
  const settleDeps: UptoSettleDeps = { ...topup.upto, logger: deps.log };
  // The request must be over in time for its settle (admission.ts, uptoRunUntil): past that, its
  // client is cut, and a stream is drained and billed for what it produced, as for a client that left;
  // a non-streamed call still under way is aborted and voided (its answer could be neither delivered
  // nor settled before the deadline: awaited, it was charged undelivered and its settle came too late).
  const cutNow = new AbortController();
  const cut = setTimeout(
    () => {
      deps.log.warn({ payment: held.payment.id }, "upto request cut: its authorization's deadline leaves only the time to settle it");
      cutNow.abort();
      deps.cutClient();
    },
    Math.min(MAX_TIMER_MS, Math.max(0, runUntil - deps.now())),
  );
  try {
    // In the try: a concurrent retry that ran first (the 409) leaves this hold to be settled for 0.
    await identifier?.start();
    const ran = await paidRequest.run(key, { capAtReservation: true, minChargeUsdc, cut: cutNow.signal });
    if (!ran.ok) throw new Error('the upto hold did not cover its own reservation');
    return { kind: 'ran' };
  } finally {
    clearTimeout(cut);
    // After the answer (JSON sent, stream ended, or a failure voided): a settle that does not
    // finish here is finished by the reconciler from the row.
    await settleUpto(settleDeps, held.payment.id).catch((err: unknown) =>
      deps.log.warn({ payment: held.payment.id, err: (err as Error).message }, 'upto settle failed; the reconciler will retry'),
    );
  }
}

function authorizationUsed(paymentId: string, ask: AskForPayment): PaidOutcome {
  return ask(
    'PAYMENT_REJECTED',
    `this upto authorization is already recorded (payment ${paymentId}); an upto authorization pays for one request only. Sign a new payment for one of accepts`,
    { reason: 'upto_authorization_used' },
  );
}
