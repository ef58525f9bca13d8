import type { Kysely } from 'kysely';
import type { Hex, PublicClient } from 'viem';
import type { Database } from '../storage/schema.ts';
import { FacilitatorUnavailable, SettlementUnknown, type Facilitator } from './facilitator/facilitator.ts';
import { isTransportError } from '../chain/rpc-errors.ts';
import type { MatchedPayment } from './match.ts';
import { RelayerCouldNotSend } from './relayer/broadcast-refusal.ts';
import { amountPaidBy, isReceiptMissing, type ChainOutcome } from './onchain.ts';
import {
  creditPayment,
  findPayment,
  isReleased,
  markFailed,
  markSubmitted,
  openPayment,
  reclaimFailed,
  releaseRefused,
  releaseUnavailable,
  TOPUP_PAYMENT,
  UNAVAILABLE_DURING_SETTLE,
  UNAVAILABLE_DURING_VERIFY,
  type PaymentRow,
} from './payment-store.ts';
import { inspect, reconcilePayment } from './reconciler.ts';
import { signedByPayer } from './signature-check.ts';

/**
 * How a top-up ends:
 * - credited: settled on chain and credited (now or by an earlier request for the same payment);
 *   `opened` says whether this request recorded (or reclaimed) the payment and settled it, as
 *   opposed to joining or replaying a payment another request opened: pay-per-request decides
 *   what a replay may do from this, never from timestamps;
 * - pending: sent, but the outcome is not known yet; the reconciler will finish it;
 * - rejected: it did not and will not settle as sent (bad signature, expired, used, no funds,
 *   another payment under the same nonce);
 * - unavailable: the facilitator or the chain could not be reached, or the node refused the
 *   relayer's transaction (nonce, fees, gas money); nothing was settled, and the same payment may
 *   be sent again.
 */
export type TopupOutcome =
  | { kind: 'credited'; payment: PaymentRow; opened: boolean }
  | { kind: 'pending'; payment: PaymentRow }
  | { kind: 'rejected'; reason: string }
  | { kind: 'unavailable'; reason: string };

export interface SettleDeps {
  db: Kysely<Database>;
  facilitator: Facilitator;
  client: PublicClient;
  logger: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** How long a duplicate submission waits for the attempt already under way. */
  settleWaitMs: number;
  now: () => number;
  /** TEST ONLY (a fail point): runs after the payment is recorded and verified, before it is sent. */
  beforeBroadcast?: () => Promise<void>;
  /**
   * Runs once the signature is known to be the payer's (signedByPayer), before anything is
   * recorded or asked of the facilitator, on every path (a first payment, a replay, a retry of a
   * payment being settled). A throw refuses the request with nothing recorded.
   */
  admitSigned?: () => Promise<void>;
  /**
   * Runs once the facilitator has verified the payment, before it is sent: the first point where
   * the payer named in it is known to have signed it. A throw refuses the request with nothing
   * sent, and the payment is left claimable again (see REFUSED_UNSENT).
   */
  admitVerified?: () => Promise<void>;
}

/** Log searches start this many blocks before the payment was recorded: a front-runner may be earlier. */
const LOG_LOOKBACK_BLOCKS = 5_000n;

/** A verified payment whose request was refused before it was sent (e.g. the payer's rate limit): the same payment may be sent again. */
export const REFUSED_UNSENT = 'verified but not sent: the request was refused before payment (see its answer); send the same payment again';

/** The exact scheme's reasons for an authorization already used (EIP-3009, Permit2), where its simulation ran. */
const AUTHORIZATION_USED = /nonce_already_used|permit2_invalid_nonce/;

/** The recorded payment under this nonce has paid nothing to payTo (unused and given up, or void): a new payment does not pay for it twice. */
export const NONCE_TAKEN =
  'this authorization nonce is already recorded for a different payment (other terms or signature), and the chain shows that payment has paid nothing to this gateway; sign a new payment';
/** The recorded payment under this nonce was settled on chain: never "sign a new payment" (it did not fail). */
export const NONCE_USED =
  'this authorization nonce is already recorded for a different payment (other terms or signature), and the chain shows that payment settled; it is credited from the chain, once (see GET /v1/topups/:wallet); nothing more was credited. Do not pay again for it';
/** The recorded payment under this nonce is being settled: it may still move the funds. */
export const NONCE_SETTLING =
  'this authorization nonce is already recorded for a different payment (other terms or signature), which is being settled; it is credited once it lands (see GET /v1/topups/:wallet); nothing more was credited. Do not pay again for it';
/** The recorded payment under this nonce is an x402 upto payment. */
export const NONCE_OF_UPTO = 'this authorization nonce belongs to an x402 upto payment of this wallet; sign a new payment';
/** The payload's signature is not the payer's: nothing is recorded (signature-check.ts). */
export const NOT_SIGNED_BY_PAYER =
  "invalid_exact_evm_signature: the signature is not the payer's (or not in the canonical form the token accepts); nothing was recorded";

export async function settleTopup(deps: SettleDeps, m: MatchedPayment): Promise<TopupOutcome> {
  let head: bigint;
  try {
    head = await deps.client.getBlockNumber();
  } catch (err) {
    return unavailable(deps, err, `the RPC for ${m.identity.network} did not answer`);
  }
  const fromBlock = Number(head > LOG_LOOKBACK_BLOCKS ? head - LOG_LOOKBACK_BLOCKS : 0n);
  // Only a payload its payer signed may record a payment: a tampered copy of someone's header sent
  // first would otherwise hold the real authorization's nonce, and the real payment would be a
  // conflict for good while anyone could still put it on chain. No RPC for
  // an EOA's signature (recovered locally); a contract wallet's costs one read.
  let signed: boolean;
  try {
    signed = await signedByPayer(deps.client, m);
  } catch (err) {
    return unavailable(deps, err, `the RPC for ${m.identity.network} did not answer`);
  }
  if (!signed) return { kind: 'rejected', reason: NOT_SIGNED_BY_PAYER };
  await deps.admitSigned?.();
  // Twice at most: a recorded attempt found abandoned is released, and then this retry claims it.
  for (let attempt = 0; ; attempt++) {
    const opened = await openPayment(deps.db, m, fromBlock, deps.now());
    if (opened.kind === 'conflict') return settleConflict(deps, m, opened.row);
    if (opened.kind === 'topup_payment') return { kind: 'rejected', reason: TOPUP_PAYMENT };
    if (opened.kind === 'claimed') return settleClaimed(deps, m, opened.row);
    const joined = await joinExisting(deps, opened.row);
    if (joined !== 'released') return joined;
    if (attempt > 0) return { kind: 'pending', payment: await findPayment(deps.db, opened.row.id) };
  }
}

async function settleClaimed(deps: SettleDeps, m: MatchedPayment, payment: PaymentRow): Promise<TopupOutcome> {
  // The row as this attempt left it on chain: a reopened payment holds an earlier attempt's hash
  // (reverted, or dropped by the node), which says nothing of this attempt. The row keeps it: that
  // calldata is public, and the watch of payments given up unsettled reads the chain by it.
  const thisAttempt = (row: PaymentRow): PaymentRow => (row.tx_hash === payment.tx_hash ? { ...row, tx_hash: null } : row);
  let verified;
  try {
    verified = await deps.facilitator.verify(m.payload, m.requirements);
  } catch (err) {
    await releaseUnavailable(deps.db, payment.id, UNAVAILABLE_DURING_VERIFY);
    return unavailable(deps, err, 'the payment facilitator is unavailable');
  }
  if (!verified.isValid) {
    // Maybe someone else already submitted this very authorization (front-running): if the money
    // reached payTo, it counts.
    return creditIfArrived(deps, thisAttempt(payment), verified.invalidReason ?? 'payment rejected by the facilitator');
  }
  try {
    await deps.admitVerified?.();
  } catch (err) {
    await markFailed(deps.db, payment.id, REFUSED_UNSENT);
    throw err;
  }
  await deps.beforeBroadcast?.();

  let settled;
  let sentHash: string | null = null; // the attempt this request made: a refusal releases only it
  try {
    settled = await deps.facilitator.settle(m.payload, m.requirements, async (hash) => {
      if (await markSubmitted(deps.db, payment.id, hash)) sentHash = hash;
    });
  } catch (err) {
    if (err instanceof RelayerCouldNotSend) {
      await releaseRefused(deps.db, payment, sentHash);
      return unavailable(deps, err, 'the payment facilitator is unavailable');
    }
    const current = await findPayment(deps.db, payment.id);
    if (err instanceof SettlementUnknown || thisAttempt(current).tx_hash) return { kind: 'pending', payment: current };
    await releaseUnavailable(deps.db, payment.id, UNAVAILABLE_DURING_SETTLE);
    return unavailable(deps, err, 'the payment facilitator is unavailable');
  }
  if (settled.success && settled.transaction) {
    const tx = settled.transaction as Hex;
    if (!(await markSubmitted(deps.db, payment.id, tx))) {
      const reason = 'the settling transaction already paid for another top-up';
      await markFailed(deps.db, payment.id, reason);
      return { kind: 'rejected', reason };
    }
    try {
      const paid = await amountPaidBy(deps.client, tx, payment);
      if (paid !== null) return credited(await creditPayment(deps.db, payment.id, tx, paid, deps.now()), true);
    } catch (err) {
      if (isTransportError(err) || isReceiptMissing(err)) return { kind: 'pending', payment: await findPayment(deps.db, payment.id) };
      throw err;
    }
  }
  return creditIfArrived(deps, thisAttempt(await findPayment(deps.db, payment.id)), settled.errorReason ?? 'settlement failed');
}

/**
 * Another signed payment is recorded under this authorization's nonce: other terms, or the same
 * terms under another signature (a row recorded before signatures were checked first, or a wallet
 * with two valid encodings). At most one authorization per nonce is ever used on chain, so the
 * chain decides the answer, and it is never "sign a new payment" while the recorded authorization
 * has moved, or is moving, the payer's money:
 * - settled: the recorded payment is credited from the chain (its Transfer to payTo, checked
 *   against the recorded terms by creditPayment, never this request's numbers), once. A payload for
 *   the same money (amount, payTo, deadline, method) gets that credit as a replay would;
 * - in flight, used but not final, dropped, or still being worked on: pending (the same money) or
 *   "being settled, do not pay again";
 * - unused and given up, or void: nothing moved, and a new payment cannot pay twice (NONCE_TAKEN).
 */
async function settleConflict(deps: SettleDeps, m: MatchedPayment, row: PaymentRow): Promise<TopupOutcome> {
  // An upto payment's nonce is settled by the upto path alone (src/payments/upto/): an exact
  // payment under it must never be answered as that payment's credit (it credited a hold, not the payer).
  if (row.upto_state !== null) return { kind: 'rejected', reason: NONCE_OF_UPTO };
  const sameMoney =
    row.amount_atomic === m.identity.amountAtomic &&
    row.pay_to === m.identity.payTo &&
    Number(row.valid_before) === m.identity.validBefore &&
    row.transfer_method === m.identity.method;
  if (row.status === 'credited') return sameMoney ? credited(row, false) : { kind: 'rejected', reason: NONCE_USED };
  let outcome: ChainOutcome;
  try {
    outcome = await inspect(deps, row);
  } catch (err) {
    return unavailable(deps, err, `the RPC for ${row.network} did not answer`);
  }
  // A payment given up (failed or released) keeps the hash of an attempt the node dropped: nothing
  // of it is on its way, and its authorization is as unused as one never sent.
  if (outcome.state === 'dropped' && row.status === 'failed') outcome = { state: 'open' };
  switch (outcome.state) {
    case 'settled': {
      const now = await creditPayment(deps.db, row.id, outcome.txHash, outcome.amountAtomic, deps.now());
      if (now.status === 'credited')
        deps.logger.warn(
          { payment: row.id, tx: outcome.txHash },
          'another payload arrived under the nonce of a payment settled on chain: that payment was credited from the chain',
        );
      if (sameMoney && now.status === 'credited') return credited(now, false);
      // Credited, or refused because the chain's amount is not the recorded one (the row says why).
      return { kind: 'rejected', reason: now.status === 'failed' && now.failure_reason ? now.failure_reason : NONCE_USED };
    }
    case 'in-flight':
    case 'used-unconfirmed':
    case 'dropped':
      return sameMoney ? { kind: 'pending', payment: row } : { kind: 'rejected', reason: NONCE_SETTLING };
    case 'open': {
      if (row.status !== 'failed') return sameMoney ? { kind: 'pending', payment: row } : { kind: 'rejected', reason: NONCE_SETTLING };
      if (!sameMoney) return { kind: 'rejected', reason: NONCE_TAKEN };
      // The same money under another valid signature, its recorded attempt given up and the
      // authorization unused: refusing it would leave the payer told to sign again while the
      // recorded authorization can still be put on chain. It settles under the recorded row (terms
      // unchanged; the credit is what the chain shows). A chat request never takes a top-up's row.
      if (m.purpose === 'chat' && row.purpose !== 'chat') return { kind: 'rejected', reason: TOPUP_PAYMENT };
      const claimed = await reclaimFailed(deps.db, row.id, deps.now());
      return claimed ? settleClaimed(deps, m, claimed) : { kind: 'pending', payment: await findPayment(deps.db, row.id) };
    }
    case 'void':
      return { kind: 'rejected', reason: NONCE_TAKEN };
  }
}

/** Asks the chain; credits a settled payment, keeps an in-flight one pending, fails the rest. */
async function creditIfArrived(deps: SettleDeps, payment: PaymentRow, reason: string): Promise<TopupOutcome> {
  let outcome: ChainOutcome;
  try {
    outcome = await inspect(deps, payment);
  } catch (err) {
    if (payment.tx_hash) return { kind: 'pending', payment };
    await markFailed(deps.db, payment.id, reason);
    return unavailable(deps, err, `the RPC for ${payment.network} did not answer`);
  }
  switch (outcome.state) {
    case 'settled':
      return credited(await creditPayment(deps.db, payment.id, outcome.txHash, outcome.amountAtomic, deps.now()), true);
    case 'in-flight':
    case 'used-unconfirmed':
    case 'dropped': // sent and lost: the reconciler releases it, and the same payment sent again settles
      return { kind: 'pending', payment };
    case 'open':
      // The facilitator's simulation saw the authorization used, the chain's last block does not: a
      // transaction that uses it is in the pool (ours, come back after a release, or anyone's).
      // Never "sign a new payment" then: the payer would pay twice. The
      // row stays open; the reconciler credits it once that transaction is mined, or releases it.
      if (AUTHORIZATION_USED.test(reason)) return { kind: 'pending', payment };
      // Released by a reconciler while this request still waited (a send whose answer took the RPC
      // timeout, its transaction unknown to the node): the authorization is unused, the payer is
      // not at fault, and the same payment sent again settles (the reconciler also keeps watching).
      if (isReleased(payment)) return unavailable(deps, null, payment.failure_reason ?? 'released');
      await markFailed(deps.db, payment.id, reason);
      return { kind: 'rejected', reason };
    case 'void':
      await markFailed(deps.db, payment.id, reason);
      return { kind: 'rejected', reason };
  }
}

/**
 * A second submission of a payment already recorded (same terms, same signature): it gets the first
 * one's result, waiting a while if it is still being settled. If the recorded attempt is older than
 * the settle wait and was never sent (its process died), it is released and this retry takes over.
 */
async function joinExisting(deps: SettleDeps, row: PaymentRow): Promise<TopupOutcome | 'released'> {
  const deadline = Date.now() + deps.settleWaitMs;
  let current = row;
  let askedChain = false;
  while (current.status === 'pending' || current.status === 'submitted') {
    if (!askedChain && deps.now() - Number(current.updated_at) >= deps.settleWaitMs) {
      askedChain = true;
      const outcome = await reconcilePayment({ ...deps, releaseAfterMs: deps.settleWaitMs }, current).catch(() => 'open' as const);
      if (outcome === 'released') return 'released';
    }
    if (Date.now() >= deadline) return { kind: 'pending', payment: current };
    await new Promise((r) => setTimeout(r, 100));
    current = await findPayment(deps.db, row.id);
  }
  if (current.status === 'credited') return credited(current, false);
  // Released meanwhile (by the reconciler of this or another instance): this retry may take it over.
  if (isReleased(current)) return 'released';
  return { kind: 'rejected', reason: current.failure_reason ?? 'payment failed' };
}

/** `opened`: this request claimed the payment row (see TopupOutcome). */
function credited(payment: PaymentRow, opened: boolean): TopupOutcome {
  if (payment.status === 'credited') return { kind: 'credited', payment, opened };
  if (payment.status === 'failed' && payment.failure_reason) return { kind: 'rejected', reason: payment.failure_reason };
  return { kind: 'rejected', reason: 'the settling transaction already paid for another top-up' };
}

function unavailable(deps: SettleDeps, err: unknown, reason: string): TopupOutcome {
  const detail = err instanceof FacilitatorUnavailable ? err.message : reason;
  deps.logger.warn({ reason: detail }, 'top-up could not reach the facilitator or chain');
  return { kind: 'unavailable', reason: detail };
}
