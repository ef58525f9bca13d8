import type { Kysely } from 'kysely';
import type { PaymentPayload } from '@x402/core/types';
import type { Hex, PublicClient } from 'viem';
import type { Database } from '../../storage/schema.ts';
import { isTransportError } from '../../chain/rpc-errors.ts';
import type { Facilitator } from '../facilitator/facilitator.ts';
import { amountPaidBy, isReceiptMissing } from '../onchain.ts';
import { findPayment, type PaymentRow } from '../payment-store.ts';
import { claimSend, closeSettled, fixCharge, markUnsettled, recordClaimedTx, recordUptoTx } from './upto-store.ts';

export interface UptoSettleDeps {
  db: Kysely<Database>;
  facilitator: Facilitator;
  clientFor(network: string): PublicClient | undefined;
  logger: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** Counts a payment that became unsettled (tollgate_upto_unsettled_total). */
  countUnsettled: () => void;
}

/**
 * Where an upto payment stands after a settle attempt: `settled` (what arrived equals the charge),
 * `unsettled` (it failed; recorded with its reason), `settling` (sent or not yet sent, outcome not
 * known: the reconciler finishes it), `running` (its request has not finished yet).
 */
export type UptoSettleOutcome = 'settled' | 'unsettled' | 'settling' | 'running' | 'written_off';

/**
 * A facilitator's unsuccessful answer is a definite refusal only when it is one of the x402
 * verify reasons (snake_case: allowance, balance, deadline, signature, terms) and none of those
 * that leave the outcome open: an authorization already used (the chain says whether it paid us), a
 * late receipt (`settlement_pending`), a failed or unknown send. A free-form message (a thrown
 * error's text) is not definite either. Anything not definite leaves the row `settling`.
 */
const OUTCOME_OPEN = /nonce|pending|transaction_failed|invalid_transaction_state|unexpected/i;
export const isDefiniteRefusal = (reason: string) => /^[a-z0-9_]+$/.test(reason) && !OUTCOME_OPEN.test(reason);

/**
 * Settles exactly the charge of the upto payment `id` once its request is finished: fixes the
 * charge (upto-store.ts, fixCharge), then sends that amount, never any other, under the payer's
 * authorization. A charge of 0 sends nothing. The hash is recorded before the broadcast, and the
 * arrival is read from the receipt's Transfer to payTo, as for exact.
 */
export async function settleUpto(deps: UptoSettleDeps, id: string): Promise<UptoSettleOutcome> {
  if ((await fixCharge(deps.db, id)) === 'running') return 'running';
  const payment = await findPayment(deps.db, id);
  if (payment.upto_state !== 'settling') return payment.upto_state as UptoSettleOutcome;
  // Sent already (its hash recorded), or claimed by another sender meanwhile (another instance's
  // reconciler, once the row is older than the settle wait): the reconciler finishes it from the chain.
  if (payment.tx_hash !== null || !(await claimSend(deps.db, payment))) return 'settling';
  return sendCharge(deps, await findPayment(deps.db, id));
}

/**
 * Sends the recorded amount of a `settling` payment and records what came of it. `payment` is the
 * row as this sender's claimSend left it: its hash is written before the broadcast only while that
 * claim still holds (recordClaimedTx), so a sender that lost its claim never broadcasts.
 */
export async function sendCharge(deps: UptoSettleDeps, payment: PaymentRow): Promise<UptoSettleOutcome> {
  const amount = BigInt(payment.settle_amount_atomic!);
  if (amount === 0n) {
    await closeSettled(deps.db, payment.id, 0n, null);
    return 'settled';
  }
  const signed = JSON.parse(payment.upto_payload!) as PaymentPayload;
  const requirements = { ...signed.accepted, amount: amount.toString() };
  let settled;
  try {
    settled = await deps.facilitator.settle(signed, requirements, (hash) => recordClaimedTx(deps.db, payment, hash));
  } catch (err) {
    // The facilitator, the RPC or the relayer's send failed, or the outcome is unknown: nothing is
    // decided here. The reconciler reads the chain (the hash, if one was recorded) and sends the
    // same amount again only while the authorization is unused.
    deps.logger.warn({ payment: payment.id, err: (err as Error).message }, 'upto settle did not complete; the reconciler will finish it');
    return 'settling';
  }
  if (settled.transaction) {
    // Successful or not (a late receipt answers `settlement_pending` with its transaction), a sent
    // transaction decides: its hash is kept (a remote facilitator has no onBroadcast), and only its
    // mined receipt makes the payment settled or, reverted, unsettled. Not mined yet: `settling`,
    // and the reconciler reads it from the chain.
    await recordUptoTx(deps.db, payment.id, settled.transaction);
    return recordArrival(deps, payment, settled.transaction as Hex);
  }
  const reason = settled.errorReason ?? 'settlement failed';
  if (!isDefiniteRefusal(reason)) {
    deps.logger.warn({ payment: payment.id, reason }, 'upto settle answered without a definite outcome; the reconciler will finish it from the chain');
    return 'settling';
  }
  return unsettled(deps, payment, `the settle of ${amount} token units failed: ${reason}`);
}

/** The receipt's Transfer to payTo must be exactly the amount settled. */
export async function recordArrival(deps: UptoSettleDeps, payment: PaymentRow, tx: Hex): Promise<UptoSettleOutcome> {
  const client = deps.clientFor(payment.network);
  if (!client) return 'settling';
  const facts = { ...payment, amount_atomic: payment.settle_amount_atomic! };
  let paid: bigint | null;
  try {
    paid = await amountPaidBy(client, tx, facts);
  } catch (err) {
    if (isTransportError(err) || isReceiptMissing(err)) return 'settling';
    throw err;
  }
  if (paid !== null && paid.toString() === payment.settle_amount_atomic) {
    await closeSettled(deps.db, payment.id, paid, tx);
    deps.logger.info({ payment: payment.id, tx, amount: paid.toString() }, 'upto payment settled for its charge');
    return 'settled';
  }
  if (paid === null) {
    // Reverted, or no transfer for this authorization: another transaction of it may have paid (a
    // dropped settle that came back), or the payer's funds went between the simulation and the
    // block. The reconciler reads the authorization on chain: paid, collectable again, or void.
    deps.logger.warn({ payment: payment.id, tx }, 'upto settle transaction moved nothing; the reconciler reads the authorization on chain');
    return 'settling';
  }
  return unsettled(deps, payment, `${tx} moved ${paid} token units, not the ${payment.settle_amount_atomic} charged`);
}

async function unsettled(deps: UptoSettleDeps, payment: PaymentRow, reason: string): Promise<UptoSettleOutcome> {
  if (await markUnsettled(deps.db, payment.id, reason)) {
    deps.countUnsettled();
    deps.logger.warn(
      { payment: payment.id, payer: payment.payer, reason },
      'upto payment unsettled after its answer was delivered: the payer is refused until it is retried or written off (tollgate admin upto)',
    );
  }
  return 'unsettled';
}
