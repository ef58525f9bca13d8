import type { Kysely } from 'kysely';
import type { Hex, PublicClient } from 'viem';
import type { Database } from '../storage/schema.ts';
import { FacilitatorUnavailable, SettlementUnknown, type Facilitator } from './facilitator.ts';
import { isTransportError } from '../chain/rpc-errors.ts';
import type { MatchedPayment } from './match.ts';
import { inspectOnChain, paysUs, type ChainOutcome } from './onchain.ts';
import { creditPayment, findPayment, isClaimedByOther, markFailed, markSubmitted, openPayment, type PaymentRow } from './payment-store.ts';

/**
 * How a top-up ends:
 * - credited: settled on chain and credited (now or by an earlier request for the same payment);
 * - pending: sent, but the outcome is not known yet; the reconciler will finish it;
 * - rejected: it did not and will not settle as sent (bad signature, expired, used, no funds);
 * - unavailable: the facilitator or the chain could not be reached; nothing was settled.
 */
export type TopupOutcome =
  | { kind: 'credited'; payment: PaymentRow }
  | { kind: 'pending'; payment: PaymentRow }
  | { kind: 'rejected'; reason: string }
  | { kind: 'unavailable'; reason: string };

export interface SettleDeps {
  db: Kysely<Database>;
  facilitator: Facilitator;
  client: PublicClient;
  logger: { warn(obj: object, msg: string): void };
  /** How long a duplicate submission waits for the attempt already under way. */
  settleWaitMs: number;
  now: () => number;
}

/** Log searches start this many blocks before the payment was recorded: a front-runner may be earlier. */
const LOG_LOOKBACK_BLOCKS = 5_000n;

export async function settleTopup(deps: SettleDeps, m: MatchedPayment): Promise<TopupOutcome> {
  let head: bigint;
  try {
    head = await deps.client.getBlockNumber();
  } catch (err) {
    return unavailable(deps, err, `the RPC for ${m.identity.network} did not answer`);
  }
  const fromBlock = Number(head > LOG_LOOKBACK_BLOCKS ? head - LOG_LOOKBACK_BLOCKS : 0n);
  const opened = await openPayment(deps.db, m, fromBlock, deps.now());
  if (opened.kind === 'existing') return joinExisting(deps, opened.row, opened.samePayload);
  const payment = opened.row;

  let verified;
  try {
    verified = await deps.facilitator.verify(m.payload, m.requirements);
  } catch (err) {
    await markFailed(deps.db, payment.id, 'facilitator unavailable during verify');
    return unavailable(deps, err, 'the payment facilitator is unavailable');
  }
  if (!verified.isValid) {
    // Maybe someone else already submitted this very authorization (front-running): if the money
    // reached payTo, it counts.
    return creditIfArrived(deps, payment, verified.invalidReason ?? 'payment rejected by the facilitator');
  }

  let settled;
  try {
    settled = await deps.facilitator.settle(m.payload, m.requirements, (hash) => markSubmitted(deps.db, payment.id, hash));
  } catch (err) {
    const current = await findPayment(deps.db, payment.id);
    if (err instanceof SettlementUnknown || current.tx_hash) return { kind: 'pending', payment: current };
    await markFailed(deps.db, payment.id, 'facilitator unavailable during settle');
    return unavailable(deps, err, 'the payment facilitator is unavailable');
  }
  if (settled.success && settled.transaction) {
    await markSubmitted(deps.db, payment.id, settled.transaction);
    try {
      const receipt = await deps.client.getTransactionReceipt({ hash: settled.transaction as Hex });
      if (receipt.status === 'success' && paysUs(receipt.logs, payment)) {
        return credited(await creditPayment(deps.db, payment.id, settled.transaction, deps.now()));
      }
    } catch (err) {
      if (isTransportError(err) || (err as { name?: string }).name === 'TransactionReceiptNotFoundError') {
        return { kind: 'pending', payment: await findPayment(deps.db, payment.id) };
      }
      throw err;
    }
  }
  return creditIfArrived(deps, await findPayment(deps.db, payment.id), settled.errorReason ?? 'settlement failed');
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
      return credited(await creditPayment(deps.db, payment.id, outcome.txHash, deps.now()));
    case 'in-flight':
      return { kind: 'pending', payment };
    case 'open':
    case 'void':
      await markFailed(deps.db, payment.id, reason);
      return { kind: 'rejected', reason };
  }
}

export function inspect(deps: Pick<SettleDeps, 'db' | 'client' | 'now'>, payment: PaymentRow): Promise<ChainOutcome> {
  return inspectOnChain(deps.client, payment, {
    nowSeconds: Math.floor(deps.now() / 1000),
    isClaimed: (tx) => isClaimedByOther(deps.db, payment.id, payment.network, tx),
  });
}

/**
 * A second submission of a payment already recorded. The same payload gets the first one's result
 * (waiting a while if it is still being settled); a different payload for the same authorization
 * nonce is refused without revealing anything about the first.
 */
async function joinExisting(deps: SettleDeps, row: PaymentRow, samePayload: boolean): Promise<TopupOutcome> {
  if (!samePayload) return { kind: 'rejected', reason: 'this authorization nonce has already been used for another payment' };
  const deadline = Date.now() + deps.settleWaitMs;
  let current = row;
  while (current.status === 'pending' || current.status === 'submitted') {
    if (Date.now() >= deadline) return { kind: 'pending', payment: current };
    await new Promise((r) => setTimeout(r, 100));
    current = await findPayment(deps.db, row.id);
  }
  if (current.status === 'credited') return credited(current);
  return { kind: 'rejected', reason: current.failure_reason ?? 'payment failed' };
}

function credited(payment: PaymentRow): TopupOutcome {
  if (payment.status !== 'credited') return { kind: 'rejected', reason: 'the settling transaction already paid for another top-up' };
  return { kind: 'credited', payment };
}

function unavailable(deps: SettleDeps, err: unknown, reason: string): TopupOutcome {
  const detail = err instanceof FacilitatorUnavailable ? err.message : reason;
  deps.logger.warn({ reason: detail }, 'top-up could not reach the facilitator or chain');
  return { kind: 'unavailable', reason: detail };
}
