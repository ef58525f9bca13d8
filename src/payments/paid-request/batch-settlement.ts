import type { PaymentPayload, SettleResponse } from '@x402/core/types';
import { isTransportError } from '../../chain/rpc-errors.ts';
import { channelHoldWallet } from '../../ledger/operations/channel-hold.ts';
import { FacilitatorUnavailable } from '../facilitator/facilitator.ts';
import type { Offer } from '../offers.ts';
import { readPaymentIdentifier } from '../pay-per-request/payment-identifier.ts';
import { payPerRequestKey } from '../pay-per-request/wallet-key.ts';
import { bindChannelPayment, type BoundChannelPayment } from '../channels/channel-binding.ts';
import { settleWithFacilitator, verifyWithFacilitator } from '../channels/channel-facilitator.ts';
import { finishPending, startRequest } from '../channels/channel-finish.ts';
import { busy, corrective, NOT_SIGNED_BY_PAYER, rejected } from '../channels/channel-answers.ts';
import { expectedVoucherMax } from '../channels/spent-vouchers.ts';
import { depositBelowMinimum, statedAsIs } from '../channels/channel-offer.ts';
import { withContractWalletHint } from '../channels/contract-wallet-hint.ts';
import { asVoucher, landedDeposit } from '../channels/deposit-landed.ts';
import { refundChannel } from '../channels/channel-refund.ts';
import {
  dropLease,
  findChannel,
  handLeaseBack,
  mirrorChain,
  recordChannel,
  recordTransfer,
  renewLease,
  snapshotOf,
  takeLease,
  type ChannelRow,
} from '../channels/channel-store.ts';
import { CHANNEL_ERRORS, type ChannelSnapshot } from '../channels/channel-types.ts';
import { verifiesLocally } from '../channels/channel-voucher.ts';
import { signedLocallyByPayer } from '../channels/payer-proof.ts';
import { refuseIfUptoUnsettled } from '../upto/admission.ts';
import type { PaidRequestDeps } from './deps.ts';
import { uptoRefusalClock } from './upto.ts';
import type { AskForPayment, PaidOffer, PaidOutcome } from './outcome.ts';
import type { PaidRequest } from './paid-request.ts';

/** What the pay-per-request entry hands the channel path: the request as planned, the payment's envelope, and the 402 it answers. */
export interface ChannelCall {
  paidRequest: PaidRequest;
  envelope: PaymentPayload;
  /** The request's batch-settlement entries (pay-per-request/offer.ts). */
  channelOffers: Offer[];
  paidOffer: PaidOffer;
  ask: AskForPayment;
}

/** The facilitator or the chain did not answer: nothing changed, and the same payment, sent again, is taken. */
const UNAVAILABLE: PaidOutcome = { kind: 'facilitator-unavailable', reason: 'the payment facilitator or the chain is unavailable' };

const unavailable = (err: unknown): PaidOutcome => {
  if (err instanceof FacilitatorUnavailable || isTransportError(err)) return UNAVAILABLE;
  throw err;
};

/**
 * Why a channel payment carrying x402 `payment-identifier` is refused before anything is verified or
 * moved. The 402 advertises the identifier (a retry under it is never paid or run twice), but a
 * channel cannot keep that promise: a voucher sent again gets the corrective 402, which the stock
 * client answers by signing the next voucher, so the retry would run and be charged again. Refused
 * plainly rather than taken with the id ignored; the stock client sends none unless asked to.
 */
const IDENTIFIER_NOT_TAKEN =
  'extensions["payment-identifier"] is not taken with a batch-settlement payment: a channel request retried is a new request, run and charged again. ' +
  'Send the channel payment without the identifier, or pay with an exact entry to have retries under it answered 409';

/**
 * A pay-per-request call paid through an x402 `batch-settlement` channel
 * (payPerRequest.batchSettlement; the spec's "Server: State & Forwarding"). The payment is bound to
 * the gateway's own offer (channel-binding.ts), the channel's lease is taken so that its requests
 * run one at a time on every instance, and the voucher must add exactly this request's ceiling to
 * what the channel has been charged (else the corrective 402 with the channel's state and its last
 * signed voucher). A deposit is verified and made through the facilitator before the request
 * runs; a voucher is checked here (EIP-712 recovery against the channel's payer authorizer) while
 * the mirrored chain state is fresh, else by the facilitator, which refreshes it. The ceiling is
 * held on the channel's hold wallet and the request runs against it like any pay-per-request
 * call, charged its actual cost (the same bill as a keyed request, never above the ceiling); the
 * channel is committed only once the answer is out, and a request charged nothing leaves the
 * channel as it was, its voucher good for the next try.
 */
export async function payWithChannel(deps: PaidRequestDeps, call: ChannelCall): Promise<PaidOutcome> {
  if (readPaymentIdentifier(call.envelope).kind !== 'none') return { kind: 'invalid', message: IDENTIFIER_NOT_TAKEN };
  const bound = bindChannelPayment(call.envelope, call.channelOffers);
  if (bound.inner.type === 'refund') return refundChannel(deps, bound, call);
  const belowMinimum = depositBelowMinimum(bound);
  if (belowMinimum) return rejected(call, belowMinimum);
  const { db } = deps;
  const leaseMs = deps.config.payPerRequest.batchSettlement.leaseSeconds * 1000;
  const payer = bound.inner.channelConfig.payer.toLowerCase();
  // Called once the payer is known to have signed and before any money moves (below): the wallet's
  // window is counted, and a wallet whose upto payment could not be settled pays nothing more here
  // either, as on the exact and top-up paths (refunds stay open: they move the payer's own money).
  const countRequest = async () => {
    await refuseIfUptoUnsettled(db, payer, uptoRefusalClock(deps));
    await deps.countRequest(payer);
  };
  let row = await findChannel(db, bound.channelId);
  let first: FirstSeen = { bound, counted: false };
  if (!row) {
    let seen: FirstSeen & { row: ChannelRow };
    try {
      const found = await firstSeen(deps, bound, countRequest);
      if (!found.ok) return rejected(call, found.reason);
      seen = found;
    } catch (err) {
      return unavailable(err);
    }
    [first, row] = [seen, seen.row];
  }
  // Anyone can name a channel (the payer's address and the stock client's salt are public): a payload
  // its payer did not sign never takes the channel's lease, or a flood of them would turn the payer's
  // own requests away as busy. A contract wallet's signature only the facilitator checks, later; a
  // channel first seen was judged by the facilitator above (its refusal names a contract wallet's trap).
  if (first.verdict === undefined && (await signedLocallyByPayer(bound)) === false) return rejected(call, NOT_SIGNED_BY_PAYER);
  const owner = deps.requestId;
  if (!(await takeLease(db, bound.channelId, owner, deps.now(), leaseMs))) return busy(call, deps.topup.facilitator, bound, row);
  try {
    row = (await findChannel(db, bound.channelId))!;
    if (row.pending_request !== null) {
      // The lease ran out on a request whose instance died: finish it first, as it would have. One
      // still running lives (its instance paused past its renewals): it gets its lease back.
      const left = await finishPending(db, bound.channelId, deps.now());
      if (left.kind === 'running') {
        await handLeaseBack(db, bound.channelId, owner, left.requestId, deps.now(), leaseMs);
        return busy(call, deps.topup.facilitator, bound, row);
      }
      row = (await findChannel(db, bound.channelId))!;
    }
    return await runOnChannel(deps, call, row, first, countRequest);
  } finally {
    await dropLease(db, bound.channelId, owner, deps.now());
  }
}

/**
 * How a channel's payment goes on after its first sight: the payment (a landed deposit's payload
 * becomes its voucher), the facilitator's verdict when it verified it, and whether the payer's
 * window was counted already (before the channel's row was recorded).
 */
interface FirstSeen {
  bound: BoundChannelPayment;
  verdict?: ChannelSnapshot;
  counted: boolean;
}

/**
 * A channel first seen. A deposit payload whose deposit is on chain already (relayed to the
 * contract by anyone who saw it) is its voucher, the baseline the contract's: the facilitator
 * would refuse it as a failed simulation. Else the facilitator says the channel is genuine and
 * what the chain holds, which is its baseline (never the client's voucher); nothing is recorded for
 * a payload it refuses, nor for a payer over its window (counted before the row is recorded, so
 * fresh salts leave no row each), and a row is kept only for a channel the chain holds money in
 * or the facilitator vouched for.
 */
async function firstSeen(
  deps: PaidRequestDeps,
  bound: BoundChannelPayment,
  countRequest: () => Promise<void>,
): Promise<(FirstSeen & { ok: true; row: ChannelRow }) | { ok: false; reason: string }> {
  const record = (snapshot: ChannelSnapshot) =>
    recordChannel(deps.db, { channelId: bound.channelId, network: bound.network, config: bound.inner.channelConfig, snapshot }, deps.now());
  const client = deps.topup.clientFor(bound.network);
  const landed = bound.inner.type === 'deposit' && client ? await landedDeposit(client, bound.channelId, bound.inner) : null;
  // An empty channel holds no deposit to go on from; the facilitator judges the payload instead.
  if (landed && landed.balance > 0) return { ok: true, bound: asVoucher(bound), counted: false, row: await record(landed) };
  const verdict = await verifyWithFacilitator(deps.topup.facilitator, bound.payload, bound.requirements, bound.channelId);
  if (!verdict.ok) return { ok: false, reason: await withContractWalletHint(client, bound.inner.channelConfig, verdict.reason) };
  await countRequest();
  return { ok: true, bound, verdict: verdict.snapshot, counted: true, row: await record(verdict.snapshot) };
}

/**
 * A voucher that does not sign what this request needs (`expected`): the corrective 402 with the
 * charged amount the client's next voucher must add the ceiling to. That is the channel's own,
 * unless "charged + ceiling" is a voucher that already paid (an honest ceiling landing exactly on an
 * earlier voucher's unused rest): then the stated amount is raised to `expected − ceiling`, so the
 * stock client, which signs "its charged amount + the ceiling" again after a corrective 402, signs
 * `expected`. The stated voucher must cover the stated amount (the client refuses a state above
 * the voucher it is shown): the channel's latest, else the one the payer just sent. With neither,
 * the request is refused as before.
 */
async function voucherMismatch(call: ChannelCall, deps: PaidRequestDeps, bound: BoundChannelPayment, row: ChannelRow, expected: number): Promise<PaidOutcome> {
  const base = expected - bound.ceilingUsdc;
  if (base === row.charged_usdc) {
    const message =
      `the voucher's maxClaimableAmount is ${bound.maxClaimableUsdc}, but this channel has been charged ${row.charged_usdc} and this request's ceiling is ` +
      `${bound.ceilingUsdc}: sign ${expected} (the channel's state and last signed voucher are in accepts[].extra)`;
    return corrective(call, deps.topup.facilitator, bound, row, CHANNEL_ERRORS.cumulativeMismatch, message);
  }
  const sent = { maxUsdc: bound.maxClaimableUsdc, signature: bound.inner.voucher.signature };
  const voucher = [statedAsIs(row).voucher, sent].find((v) => v !== null && v.maxUsdc >= base) ?? null;
  const spent = row.charged_usdc + bound.ceilingUsdc;
  if (voucher === null) {
    return rejected(
      call,
      `a voucher for ${spent} (this channel's charged ${row.charged_usdc} plus this request's ceiling) already paid for a request on this channel and pays for no other; change max_tokens and send again`,
    );
  }
  const message =
    `a voucher for ${spent} (this channel's charged ${row.charged_usdc} plus this request's ceiling of ${bound.ceilingUsdc}) already paid for a request on this channel and pays for no other: ` +
    `sign ${expected} (the ceiling on ${base}, as accepts[].extra.channelState says); the request is still charged at most ${bound.ceilingUsdc}`;
  return corrective(call, deps.topup.facilitator, bound, row, CHANNEL_ERRORS.cumulativeMismatch, message, { chargedUsdc: base, voucher });
}

async function runOnChannel(
  deps: PaidRequestDeps,
  call: ChannelCall,
  channelRow: ChannelRow,
  first: FirstSeen,
  countRequest: () => Promise<void>,
): Promise<PaidOutcome> {
  let [bound, row] = [first.bound, channelRow];
  const firstVerdict = first.verdict;
  // The maximum this request's voucher must sign: "charged + ceiling", or a little more when that one
  // already paid for a request (spent-vouchers.ts). Read under the channel's lease, after its row,
  // and startRequest requires the charged amount unchanged since, so no commit slips between.
  const expected = await expectedVoucherMax(deps.db, bound.channelId, row.charged_usdc + bound.ceilingUsdc);
  if (bound.maxClaimableUsdc !== expected) return voucherMismatch(call, deps, bound, row, expected);
  // The wallet's window (the one its API keys share) is counted once the payer is known to have
  // signed, and before any money moves: a deposit over the limit is refused before it is made.
  // A channel first seen through the facilitator had it counted before its row was recorded.
  const count = first.counted ? async () => {} : countRequest;
  let checked: Checked;
  try {
    if (!firstVerdict) [bound, row] = await depositSentAgain(deps, bound, row);
    checked = bound.inner.type === 'deposit' ? await deposit(deps, bound, firstVerdict, count) : await voucher(deps, bound, row, firstVerdict);
  } catch (err) {
    return unavailable(err);
  }
  if (!checked.ok) return rejected(call, checked.reason);
  const { snapshot } = checked;
  const closing = closingChannel(snapshot);
  if (closing) return rejected(call, closing);
  if (bound.maxClaimableUsdc > snapshot.balance) {
    const reason = `the voucher's ${bound.maxClaimableUsdc} is above the channel's balance of ${snapshot.balance}; deposit more into the channel`;
    return rejected(call, reason);
  }
  if (bound.maxClaimableUsdc < snapshot.totalClaimed + bound.ceilingUsdc) {
    return corrective(
      call,
      deps.topup.facilitator,
      bound,
      row,
      CHANNEL_ERRORS.cumulativeMismatch,
      `the voucher's ${bound.maxClaimableUsdc} is below what was claimed on chain plus this request's ceiling`,
    );
  }
  if (bound.inner.type !== 'deposit') await count();
  const owner = deps.requestId;
  const pending = {
    requestId: deps.requestId,
    maxClaimableUsdc: bound.maxClaimableUsdc,
    signature: bound.inner.voucher.signature,
    ceilingUsdc: bound.ceilingUsdc,
    chargedUsdc: row.charged_usdc,
  };
  if (!(await startRequest(deps.db, bound.channelId, owner, pending, deps.now()))) return busy(call, deps.topup.facilitator, bound, row);
  const receipt = (charge?: number): SettleResponse =>
    receiptOf(bound, snapshot, checked.deposit, charge === undefined ? undefined : { charge, charged: row.charged_usdc + charge });
  deps.showChannelReceipt(receipt());
  const leaseMs = deps.config.payPerRequest.batchSettlement.leaseSeconds * 1000;
  // Renewed while the request runs (a long stream), so only a dead instance's lease runs out.
  const renew = setInterval(() => {
    renewLease(deps.db, bound.channelId, owner, deps.now(), leaseMs).catch((err: unknown) =>
      deps.log.warn({ channel: bound.channelId, err: (err as Error).message }, 'channel lease renewal failed'),
    );
  }, leaseMs / 3);
  renew.unref();
  // Once the bill is final (before the answer's last bytes): the receipt names the charge, and the
  // channel is committed and let go, so the client's next request finds it free.
  const stopped = () => deps.stopsBeforeChannelCommit?.() === true;
  const onBilled = async (charge: number) => {
    deps.showChannelReceipt(receipt(charge));
    if (stopped()) return;
    await commit(deps, bound.channelId, owner).catch((err: unknown) =>
      deps.log.warn({ channel: bound.channelId, err: (err as Error).message }, 'channel commit failed; retried after the answer'),
    );
  };
  try {
    const key = await payPerRequestKey(deps.db, channelHoldWallet(bound.channelId));
    const ran = await call.paidRequest.run(key, { capAtReservation: true, onBilled });
    if (!ran.ok) throw new Error("the channel's hold did not cover its own ceiling");
    return { kind: 'ran' };
  } finally {
    clearInterval(renew);
    if (!stopped()) await commit(deps, bound.channelId, owner);
  }
}

/**
 * A deposit payload whose deposit is in the channel already (sent again after its request failed
 * upstream, or relayed to the contract by someone else) is its voucher: the payment and the row to
 * go on with, the chain's state mirrored. The facilitator would refuse it as a failed simulation,
 * though its voucher still pays for a request as the spec's voucher payload would.
 */
async function depositSentAgain(deps: PaidRequestDeps, bound: BoundChannelPayment, row: ChannelRow): Promise<[BoundChannelPayment, ChannelRow]> {
  const client = deps.topup.clientFor(bound.network);
  if (bound.inner.type !== 'deposit' || !client) return [bound, row];
  const landed = await landedDeposit(client, bound.channelId, bound.inner);
  if (!landed) return [bound, row];
  await mirrorChain(deps.db, bound.channelId, landed, deps.now());
  return [asVoucher(bound), (await findChannel(deps.db, bound.channelId))!];
}

/** Commits the channel's pending request (a no-op once committed) and gives up `owner`'s lease. */
async function commit(deps: PaidRequestDeps, channelId: string, owner: string): Promise<void> {
  const finished = await finishPending(deps.db, channelId, deps.now(), owner);
  if (finished.kind === 'running') {
    deps.log.warn({ channel: channelId }, "channel request's charge not final yet (a spooled settle); the channel's next request commits it");
    return;
  }
  await dropLease(deps.db, channelId, owner, deps.now());
}

type Checked = { ok: true; snapshot: ChannelSnapshot; deposit?: { transaction: string; amount: string } } | { ok: false; reason: string };

/** A deposit: verified, then made on chain through the facilitator, before the request runs. */
async function deposit(
  deps: PaidRequestDeps,
  bound: BoundChannelPayment,
  firstVerdict: ChannelSnapshot | undefined,
  countRequest: () => Promise<void>,
): Promise<Checked> {
  const { facilitator } = deps.topup;
  let verified = firstVerdict;
  if (!verified) {
    const verdict = await verifyWithFacilitator(facilitator, bound.payload, bound.requirements, bound.channelId);
    if (!verdict.ok) return verdict;
    verified = verdict.snapshot;
  }
  // Refused before the deposit is made: the payer's money stays in its wallet.
  const closing = closingChannel(verified);
  if (closing) return { ok: false, reason: closing };
  await countRequest();
  const settled = await settleWithFacilitator(facilitator, bound.payload, bound.requirements, bound.channelId);
  if (!settled.ok) return settled;
  const now = deps.now();
  await mirrorChain(deps.db, bound.channelId, settled.snapshot, now);
  const amountUsdc = Number(bound.inner.type === 'deposit' ? bound.inner.deposit.amount : 0);
  await recordTransfer(deps.db, { channelId: bound.channelId, kind: 'deposit', amountUsdc, txHash: settled.transaction }, now);
  return { ok: true, snapshot: settled.snapshot, deposit: { transaction: settled.transaction, amount: String(amountUsdc) } };
}

/**
 * Why a channel whose payer started a timed withdrawal takes no new charge, or null. The payer can
 * finalize it once withdrawDelay has passed, taking everything not claimed by then: a request
 * served meanwhile is a charge the background claimer must land first, and one served near the
 * deadline may never be claimed. The snapshot is the facilitator's (a mirror showing a withdrawal
 * is never fresh: channel vouchers are then verified by the facilitator), so a withdrawal the
 * cooperative refund cancelled, or one finalized, lets the channel be paid on again.
 */
function closingChannel(snapshot: ChannelSnapshot): string | null {
  if (snapshot.withdrawRequestedAt === 0) return null;
  const at = new Date(snapshot.withdrawRequestedAt * 1000).toISOString();
  return (
    `${CHANNEL_ERRORS.withdrawing}: this channel is closing (its payer started a timed withdrawal at ${at}) and takes no new charges; ` +
    'pay on a new channel (another salt), or cancel the withdrawal with a cooperative refund (GET /v1/channels/refund)'
  );
}

/**
 * A voucher: checked here when the channel commits to an EOA payer authorizer and the mirrored
 * chain state is fresh with no withdrawal under way (the spec's fast path: one signature
 * recovery); otherwise by the facilitator, whose answer refreshes the mirror.
 */
async function voucher(deps: PaidRequestDeps, bound: BoundChannelPayment, row: ChannelRow, firstVerdict: ChannelSnapshot | undefined): Promise<Checked> {
  if (firstVerdict) return { ok: true, snapshot: firstVerdict };
  const { freshSeconds } = deps.config.payPerRequest.batchSettlement;
  const fresh = deps.now() - row.synced_at <= freshSeconds * 1000 && row.withdraw_requested_at === 0;
  if (fresh && verifiesLocally(bound.inner.channelConfig)) {
    if (!(await signedLocallyByPayer(bound))) return { ok: false, reason: CHANNEL_ERRORS.voucherSignature };
    return { ok: true, snapshot: snapshotOf(row) };
  }
  const verdict = await verifyWithFacilitator(deps.topup.facilitator, bound.payload, bound.requirements, bound.channelId);
  if (!verdict.ok) return verdict;
  await mirrorChain(deps.db, bound.channelId, verdict.snapshot, deps.now());
  return verdict;
}

/**
 * The PAYMENT-RESPONSE the stock client continues from: no transaction and no amount for a voucher
 * (a deposit's own), `extra.chargedAmount` once the charge is known (a JSON answer; a stream's
 * headers leave before it, and the client then learns its charge from the next corrective 402), and
 * `extra.channelState` with the channel's charged amount after this request.
 */
function receiptOf(
  bound: BoundChannelPayment,
  snapshot: ChannelSnapshot,
  deposited: { transaction: string; amount: string } | undefined,
  billed: { charge: number; charged: number } | undefined,
): SettleResponse {
  const channelState = {
    channelId: bound.channelId,
    balance: String(snapshot.balance),
    totalClaimed: String(snapshot.totalClaimed),
    withdrawRequestedAt: snapshot.withdrawRequestedAt,
    refundNonce: snapshot.refundNonce,
    ...(billed ? { chargedCumulativeAmount: String(billed.charged) } : {}),
  };
  return {
    success: true,
    transaction: deposited?.transaction ?? '',
    network: bound.network as SettleResponse['network'],
    payer: bound.inner.channelConfig.payer,
    amount: deposited?.amount ?? '',
    extra: { ...(billed ? { chargedAmount: String(billed.charge) } : {}), channelState },
  };
}
