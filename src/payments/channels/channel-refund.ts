import type { SettleResponse } from '@x402/core/types';
import { isTransportError } from '../../chain/rpc-errors.ts';
import { FacilitatorUnavailable } from '../facilitator/facilitator.ts';
import type { PaidRequestDeps } from '../paid-request/deps.ts';
import type { PaidOutcome } from '../paid-request/outcome.ts';
import { corrective, rejected, type ChannelAnswers } from './channel-answers.ts';
import type { BoundChannelPayment } from './channel-binding.ts';
import { snapshotIn, verifyWithFacilitator } from './channel-facilitator.ts';
import { holdForRefund, refundInFlight, settleRefundInFlight } from './refund-in-flight.ts';
import { SETTLEMENT_PENDING } from '../relayer/upto-charge-settle.ts';
import { channelStateOf } from './channel-offer.ts';
import {
  dropLease,
  findChannel,
  markRefundVoucher,
  mirrorChain,
  recordChannel,
  recordTransfer,
  takeLease,
  unmarkRefundVoucher,
  type ChannelRow,
} from './channel-store.ts';
import { CHANNEL_ERRORS } from './channel-types.ts';

/**
 * A cooperative refund (the spec's "Cooperative refund flow"): the payer's zero-charge voucher
 * (its maxClaimableAmount equal to what the channel has been charged) asks for the unclaimed rest
 * of its escrow, or `amount` of it. Under the channel's lease, so no request is charged meanwhile:
 * verified by the facilitator, completed with the refund nonce and a claim of everything charged
 * (the refund voucher itself: the gateway keeps what it earned, the payer gets the rest), and
 * settled by the facilitator, which signs as the receiver authorizer. No request runs.
 */
export async function refundChannel(deps: PaidRequestDeps, bound: BoundChannelPayment, ask: ChannelAnswers): Promise<PaidOutcome> {
  const { db } = deps;
  const owner = deps.requestId;
  try {
    let row = await findChannel(db, bound.channelId);
    if (!row) {
      const verdict = await verifyWithFacilitator(deps.topup.facilitator, bound.payload, bound.requirements, bound.channelId);
      if (!verdict.ok) return refused(ask, verdict.reason);
      row = await recordChannel(
        db,
        { channelId: bound.channelId, network: bound.network, config: bound.inner.channelConfig, snapshot: verdict.snapshot },
        deps.now(),
      );
    }
    const inFlight = refundInFlight(row);
    if (inFlight) {
      const answered = await answerInFlight(deps, bound, row, inFlight.tx);
      if (answered) return answered;
    }
    const leaseMs = deps.config.payPerRequest.batchSettlement.leaseSeconds * 1000;
    if (!(await takeLease(db, bound.channelId, owner, deps.now(), leaseMs))) {
      return refused(ask, `${CHANNEL_ERRORS.busy}: a request on this channel is running; ask for the refund again when it has finished`);
    }
    try {
      return await refundUnderLease(deps, bound, (await findChannel(db, bound.channelId))!, ask, owner);
    } finally {
      await dropLease(db, bound.channelId, owner, deps.now());
    }
  } catch (err) {
    if (err instanceof FacilitatorUnavailable || isTransportError(err))
      return { kind: 'facilitator-unavailable', reason: 'the payment facilitator or the chain is unavailable' };
    throw err;
  }
}

async function refundUnderLease(deps: PaidRequestDeps, bound: BoundChannelPayment, row: ChannelRow, ask: ChannelAnswers, owner: string): Promise<PaidOutcome> {
  if (row.pending_request !== null) return refused(ask, `${CHANNEL_ERRORS.busy}: a request on this channel is not finished yet; ask again shortly`);
  if (bound.maxClaimableUsdc !== row.charged_usdc) {
    const message = `a refund's voucher must sign exactly what the channel has been charged (${row.charged_usdc}), not ${bound.maxClaimableUsdc}`;
    return corrective(ask, deps.topup.facilitator, bound, row, CHANNEL_ERRORS.cumulativeMismatch, message);
  }
  const verdict = await verifyWithFacilitator(deps.topup.facilitator, bound.payload, bound.requirements, bound.channelId);
  if (!verdict.ok) return refused(ask, verdict.reason);
  const remainder = verdict.snapshot.balance - row.charged_usdc;
  const asked = bound.inner.type === 'refund' && bound.inner.amount !== undefined ? Number(bound.inner.amount) : remainder;
  if (remainder <= 0) return refused(ask, 'invalid_batch_settlement_evm_refund_no_balance: nothing of the channel is left to refund');
  if (!Number.isSafeInteger(asked) || asked <= 0 || asked > remainder) {
    return refused(ask, `invalid_batch_settlement_evm_refund_amount_invalid: at most ${remainder} of the channel can be refunded`);
  }
  const { voucher, channelConfig } = bound.inner;
  const claims = [
    {
      voucher: { channel: channelConfig, maxClaimableAmount: voucher.maxClaimableAmount },
      signature: voucher.signature,
      totalClaimed: String(row.charged_usdc),
    },
  ];
  // Marked before the refund is settled, so a crash between the two refuses a replay rather than refunding twice.
  if (!(await markRefundVoucher(deps.db, bound.channelId, voucher.signature, deps.now()))) {
    const message = 'this refund voucher was used for a refund already (a refund is asked once per charged amount); ask again after the next request';
    return refused(ask, `${CHANNEL_ERRORS.refundReplayed}: ${message}`);
  }
  const enriched = { ...bound.inner, amount: String(asked), refundNonce: verdict.snapshot.refundNonce, claims };
  const unmark = () => unmarkRefundVoucher(deps.db, bound.channelId, voucher.signature, deps.now());
  let answer: SettleResponse;
  try {
    answer = await deps.topup.facilitator.settle({ ...bound.payload, payload: enriched }, bound.requirements);
  } catch (err) {
    // Thrown, not answered: the refund may be on its way to the chain or not, and nothing here can
    // tell. Freed, the channel could serve requests on escrow about to be paid back; "refused" could
    // be false. It stays held, its hash unknown, until the chain's refund nonce says a refund landed.
    if (await holdForRefund(deps.db, bound.channelId, owner, null, verdict.snapshot.refundNonce, deps.now())) return { kind: 'pending', transaction: null };
    await unmark();
    throw err;
  }
  if (!answer.success && answer.errorReason === SETTLEMENT_PENDING && answer.transaction) {
    // Sent, not confirmed: the voucher stays spent and the channel stays held until the receipt is read.
    if (await holdForRefund(deps.db, bound.channelId, owner, answer.transaction, verdict.snapshot.refundNonce, deps.now()))
      return { kind: 'pending', transaction: answer.transaction };
  }
  const snapshot = answer.success ? snapshotIn((answer.extra as { channelState?: unknown } | undefined)?.channelState, bound.channelId) : null;
  if (!answer.success || !snapshot) {
    await unmark();
    return refused(
      ask,
      answer.success ? "the facilitator's settle answer carries no channel state" : (answer.errorReason ?? 'the facilitator did not settle it'),
    );
  }
  const now = deps.now();
  await mirrorChain(deps.db, bound.channelId, snapshot, now);
  const refunded = Number(answer.amount || asked);
  await recordTransfer(deps.db, { channelId: bound.channelId, kind: 'refund', amountUsdc: refunded, txHash: answer.transaction }, now);
  return refundedAnswer(deps, bound, refunded, answer.transaction);
}

/** The 200 of a refund made: its receipt, with the channel's state after it. */
async function refundedAnswer(deps: PaidRequestDeps, bound: BoundChannelPayment, refunded: number, transaction: string): Promise<PaidOutcome> {
  const after = (await findChannel(deps.db, bound.channelId))!;
  const receipt: SettleResponse = {
    success: true,
    transaction,
    network: bound.network as SettleResponse['network'],
    payer: bound.inner.channelConfig.payer,
    amount: String(refunded),
    extra: { channelState: channelStateOf(after) },
  };
  deps.showChannelReceipt(receipt);
  return { kind: 'refunded', refundedUsdc: refunded, channelId: bound.channelId, transaction };
}

/**
 * A refund asked while the channel is held for an earlier one not yet confirmed (refund-in-flight.ts):
 * its receipt is read first. Still unmined, however long ago it was sent: the same pending answer,
 * with its transaction (it can still land). Mined: the row caught up, and the payer who asked it
 * again gets its receipt. Reverted, or dropped by the node: null, and this refund is handled as a new one.
 */
async function answerInFlight(deps: PaidRequestDeps, bound: BoundChannelPayment, row: ChannelRow, tx: `0x${string}` | null): Promise<PaidOutcome | null> {
  const client = deps.topup.clientFor(row.network);
  if (!client) return null;
  const fate = await settleRefundInFlight(deps.db, client, row, tx, deps.now());
  if (fate.kind === 'pending') return { kind: 'pending', transaction: tx };
  if (fate.kind !== 'landed') return null;
  const sameVoucher = row.last_refund_signature === bound.inner.voucher.signature.toLowerCase();
  return sameVoucher ? refundedAnswer(deps, bound, fate.refundedUsdc, fate.transaction) : null;
}

const refused = (ask: ChannelAnswers, reason: string) => rejected(ask, reason, 'the refund was refused');
