import type { Kysely } from 'kysely';
import type { PublicClient } from 'viem';
import type { PayPerRequestConfig } from '../../../config/schema.ts';
import { usdToMicro } from '../../../ledger/usd.ts';
import type { Database } from '../../../storage/schema.ts';
import type { Facilitator } from '../../facilitator/facilitator.ts';
import { listUnclaimed, markClaimed, mirrorChain, recordTransfer, type ChannelRow } from '../channel-store.ts';
import { readOnchainChannel, readOnchainReceiver, snapshotFromChain, type OnchainChannel } from '../onchain-channel.ts';
import { channelReceivers, channelsHeldForRefunds, settleTransferKey, unclaimedSince } from './claim-store.ts';
import { sendClaim, sendSettle, type ClaimRow } from './claim-send.ts';
import { recordRecoveredClaim } from './claim-recovery.ts';
import { heldForRefund, refundInFlight, settleRefundInFlight, type RefundFate } from '../refund-in-flight.ts';

export const CLAIM_LEASE = 'channel-claims';
/** Channels looked at per pass, the most owed first; the rest wait for the next pass. */
const CHANNELS_PER_PASS = 1000;

export interface ClaimMetrics {
  claims(): void;
  claimed(usdc: number): void;
  failed(): void;
  settled(): void;
  withdrawalSeen(): void;
}

/** The claimer's lease (retention/job-lease.ts namedLease under CLAIM_LEASE): one instance's pass at a time. */
export interface ClaimLease {
  hold(holder: string, now: number, ttlMs: number): Promise<boolean>;
  release(holder: string): Promise<void>;
}

export interface ClaimDeps {
  db: Kysely<Database>;
  lease: ClaimLease;
  facilitator: Facilitator;
  clientFor(network: string): PublicClient | undefined;
  config: PayPerRequestConfig['batchSettlement'];
  logger: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  now(): number;
  metrics?: ClaimMetrics;
  /** Test only: runs once a claim transaction landed, before the channels are marked claimed (a crash there). */
  afterClaim?: (txHash: string) => void | Promise<void>;
}

export interface ClaimPassOutcome {
  /** False when another instance holds the claimer's lease. */
  ran: boolean;
  /** The claim transactions sent, with the channels each covered. */
  claims: Array<{ transaction: string; channels: string[] }>;
  settles: string[];
  /**
   * Channels claimed further on chain than their rows said (a claim whose row update was lost): the
   * claim is recorded (row and transfer history, claim-recovery.ts) and not sent again; a channel
   * charged more since is then claimed for the rest only.
   */
  recovered: string[];
  failures: string[];
  /** Refunds sent earlier without a confirmation, now mined (`landed`), reverted or dropped by the node: their channels given back. */
  refunds: Array<{ channel: string; transaction: string; landed: boolean }>;
  /**
   * Held refunds the chain shows landed (its refund nonce past `nonce`) whose Refunded event was not found:
   * nothing booked, their channels still held; the next pass whose log search works books them.
   */
  unresolved: Array<{ channel: string; nonce: string; searchFailure: string }>;
}

/**
 * One pass of the channel claimer, on the instance holding its lease: every channel with charges
 * not yet claimed is read on chain (its mirror refreshed, so a payer's timed withdrawal is seen
 * within a pass), and those due (unclaimed at least claimThresholdUsd, unclaimed since
 * claimMaxAgeSeconds, or withdrawing; all with `force`) are claimed, up to maxChannelsPerClaim per
 * claimWithSignature; then every receiver with claimed-but-unsettled funds is settled. A claim is
 * cumulative: sent again after a crash it moves nothing, and a channel the chain shows claimed
 * already is only mirrored. A failure leaves the rows as they were for the next pass.
 */
export async function runClaimPass(deps: ClaimDeps, o: { holder: string; force?: boolean }): Promise<ClaimPassOutcome> {
  const outcome: ClaimPassOutcome = { ran: false, claims: [], settles: [], recovered: [], failures: [], refunds: [], unresolved: [] };
  const leaseMs = 3 * deps.config.claimIntervalSeconds * 1000;
  if (!(await deps.lease.hold(o.holder, deps.now(), leaseMs))) return outcome;
  outcome.ran = true;
  await settleRefunds(deps, outcome);
  const due = await dueClaims(deps, outcome, o.force ?? false);
  for (const batch of batches(due, deps.config.maxChannelsPerClaim)) await claimBatch(deps, batch, outcome);
  await settleReceivers(deps, outcome);
  return outcome;
}

async function dueClaims(deps: ClaimDeps, outcome: ClaimPassOutcome, force: boolean): Promise<ClaimRow[]> {
  const owing = await listUnclaimed(deps.db, CHANNELS_PER_PASS);
  const since = await unclaimedSince(
    deps.db,
    owing.map((r) => r.channel_id),
  );
  const threshold = usdToMicro(String(deps.config.claimThresholdUsd));
  const oldest = deps.now() - deps.config.claimMaxAgeSeconds * 1000;
  const due: ClaimRow[] = [];
  for (const row of owing) {
    const client = deps.clientFor(row.network);
    if (!client) {
      fail(deps, outcome, `channel ${row.channel_id}: no chain configured for ${row.network}`);
      continue;
    }
    let chain: OnchainChannel;
    try {
      chain = await readOnchainChannel(client, row.channel_id as `0x${string}`);
      // A held channel's mirror is its refund's to move (settleRefunds): refreshed here, it would take the
      // balance after a refund not recorded yet, and the refund's recovery, measuring the balance it lost, find 0.
      if (heldForRefund(row) && chain.withdrawRequestedAt === 0) continue;
      // Before the mirror takes the chain's totalClaimed: the row's older one is what shows a claim was lost.
      if (chain.totalClaimed > BigInt(row.total_claimed_usdc)) await recoverClaim(deps, client, row, chain.totalClaimed, outcome);
      await refreshMirror(deps, row, chain);
    } catch (err) {
      fail(deps, outcome, `channel ${row.channel_id}: its on-chain state could not be read (${(err as Error).message.split('\n')[0]})`);
      continue;
    }
    // Never above the balance: after a withdrawal the contract refuses it, and the whole batch with it.
    const claimable = Math.min(row.charged_usdc, Number(chain.balance));
    const claimed = Number(chain.totalClaimed);
    if (claimed >= claimable) continue;
    const withdrawing = chain.withdrawRequestedAt > 0;
    // A refund in flight carries the claim of everything charged (no request runs while it holds the
    // channel): a claim beside it is gas spent for nothing, racing it on chain. A timed withdrawal
    // under way overrides that: its completion is the charges' deadline, whatever the refund's fate.
    if (heldForRefund(row) && !withdrawing) continue;
    if (force || withdrawing || claimable - claimed >= threshold || (since.get(row.channel_id) ?? 0) <= oldest) {
      due.push({ row, totalClaimed: claimable });
    }
  }
  return due;
}

/**
 * Cooperative refunds sent but not confirmed when the payer was answered: each channel's row is
 * brought up to its refund's receipt and given back (refund-in-flight.ts), whether or not the payer
 * asks again; first, so that the claims below read the mirror the refund left.
 */
async function settleRefunds(deps: ClaimDeps, outcome: ClaimPassOutcome): Promise<void> {
  for (const row of await channelsHeldForRefunds(deps.db)) {
    const held = refundInFlight(row);
    const client = deps.clientFor(row.network);
    if (!held || !client) continue;
    const tx = held.tx ?? 'of unknown hash';
    try {
      const fate = await settleRefundInFlight(deps.db, client, row, held.tx, deps.now());
      if (fate.kind === 'landed') {
        outcome.refunds.push({ channel: row.channel_id, transaction: fate.transaction, landed: true });
        if (fate.transaction !== held.tx) refundFoundOnChain(deps, row, held.tx, fate);
      } else if (fate.kind !== 'pending') outcome.refunds.push({ channel: row.channel_id, transaction: tx, landed: false });
      else if (fate.unbooked) refundLandedUnbooked(deps, row, fate.unbooked, outcome);
      else if (fate.unresolved) fail(deps, outcome, `channel ${row.channel_id}: ${fate.unresolved}; it stays held until an operator records it`);
    } catch (err) {
      fail(deps, outcome, `channel ${row.channel_id}: the fate of its refund ${tx} could not be read (${(err as Error).message.split('\n')[0]})`);
    }
  }
}

/** A held refund found landed under a transaction the gateway did not hold: said, with what its event booked. */
function refundFoundOnChain(deps: ClaimDeps, row: ChannelRow, held: string | null, fate: Extract<RefundFate, { kind: 'landed' }>): void {
  const facts = { channel: row.channel_id, held, transaction: fate.transaction, refundedUsdc: fate.refundedUsdc };
  deps.logger.warn(facts, 'a refund held for its confirmation landed under another transaction (the chain says so); recorded from the chain');
}

/**
 * A held refund the chain shows landed, its event not found: money is never booked from a guess (a
 * balance difference is moved by deposits too), so the channel stays held and each pass says so until
 * its log search works (an RPC that refuses eth_getLogs needs replacing).
 */
function refundLandedUnbooked(deps: ClaimDeps, row: ChannelRow, unbooked: { nonce: string; searchFailure: string }, outcome: ClaimPassOutcome): void {
  outcome.unresolved.push({ channel: row.channel_id, ...unbooked });
  const facts = { channel: row.channel_id, nonce: unbooked.nonce, searchFailure: unbooked.searchFailure };
  deps.logger.warn(
    facts,
    'a held refund landed on chain but its Refunded event was not found: nothing booked, the channel stays held; searched again next pass',
  );
}

/** A claim that landed while its row update was lost: recorded now, in the row and the transfer history, and not sent again. */
async function recoverClaim(deps: ClaimDeps, client: PublicClient, row: ChannelRow, totalClaimed: bigint, outcome: ClaimPassOutcome): Promise<void> {
  const recovered = await recordRecoveredClaim(deps.db, client, row, totalClaimed, deps.now());
  if (!recovered) return;
  outcome.recovered.push(row.channel_id);
  deps.metrics?.claimed(recovered.claimedUsdc);
  const facts = { channel: row.channel_id, totalClaimed: String(totalClaimed), transaction: recovered.txHash, searchFailure: recovered.searchFailure };
  deps.logger.warn(facts, 'a claim found landed on chain but not recorded (a crash after it was sent) is recorded now; it is not claimed again');
}

/** The mirror follows the chain; a withdrawal newly seen is logged with the time left to claim. */
async function refreshMirror(deps: ClaimDeps, row: ChannelRow, chain: OnchainChannel): Promise<void> {
  const snapshot = snapshotFromChain(row.channel_id, chain);
  const same =
    snapshot.balance === row.balance_usdc &&
    snapshot.totalClaimed === row.total_claimed_usdc &&
    snapshot.withdrawRequestedAt === row.withdraw_requested_at &&
    snapshot.refundNonce === row.refund_nonce;
  if (same) return;
  await mirrorChain(deps.db, row.channel_id, snapshot, deps.now());
  if (row.withdraw_requested_at === 0 && chain.withdrawRequestedAt > 0) {
    deps.metrics?.withdrawalSeen();
    const completesAt = new Date((chain.withdrawRequestedAt + row.withdraw_delay) * 1000).toISOString();
    deps.logger.warn({ channel: row.channel_id, completesAt }, 'a payer started a timed withdrawal from its channel; its charges are claimed now');
  }
}

/** Claim rows grouped by what one claimWithSignature may cover (one network, receiver, token, receiverAuthorizer), `max` at most. */
function batches(due: ClaimRow[], max: number): ClaimRow[][] {
  const groups = new Map<string, ClaimRow[]>();
  for (const c of due) {
    const key = [c.row.network, c.row.receiver, c.row.token, c.row.receiver_authorizer].join('|');
    groups.set(key, [...(groups.get(key) ?? []), c]);
  }
  const out: ClaimRow[][] = [];
  for (const rows of groups.values()) for (let i = 0; i < rows.length; i += max) out.push(rows.slice(i, i + max));
  return out;
}

async function claimBatch(deps: ClaimDeps, batch: ClaimRow[], outcome: ClaimPassOutcome): Promise<void> {
  const ids = batch.map((c) => c.row.channel_id);
  let settled;
  try {
    settled = await sendClaim(deps.facilitator, batch);
  } catch (err) {
    fail(deps, outcome, `claim of ${ids.length} channels: ${(err as Error).message}`);
    return;
  }
  if (!settled.success) {
    fail(deps, outcome, `claim of ${ids.length} channels refused: ${settled.errorReason} ${settled.errorMessage ?? ''}`.trim());
    // One channel the contract refuses (its payer's withdrawal completed meanwhile) would hold back
    // every other: the halves are claimed apart, down to the one channel that fails alone.
    if (batch.length > 1) {
      const half = Math.ceil(batch.length / 2);
      await claimBatch(deps, batch.slice(0, half), outcome);
      await claimBatch(deps, batch.slice(half), outcome);
    }
    return;
  }
  await deps.afterClaim?.(settled.transaction);
  const now = deps.now();
  let claimedUsdc = 0;
  for (const { row, totalClaimed } of batch) {
    if (await markClaimed(deps.db, row.channel_id, totalClaimed, settled.transaction, now)) claimedUsdc += totalClaimed - row.total_claimed_usdc;
    else
      deps.logger.warn({ channel: row.channel_id, totalClaimed }, 'a landed claim was not recorded: the row moved meanwhile; the next pass mirrors the chain');
  }
  deps.metrics?.claims();
  deps.metrics?.claimed(claimedUsdc);
  outcome.claims.push({ transaction: settled.transaction, channels: ids });
  deps.logger.info({ transaction: settled.transaction, channels: ids.length, claimedUsdc }, 'claimed batch-settlement channels');
}

/** Every receiver whose claims are not all paid out gets one settle (a settle that failed before is tried again here). */
async function settleReceivers(deps: ClaimDeps, outcome: ClaimPassOutcome): Promise<void> {
  for (const { network, receiver, token } of await channelReceivers(deps.db)) {
    const client = deps.clientFor(network);
    if (!client) continue;
    try {
      const totals = await readOnchainReceiver(client, receiver as `0x${string}`, token as `0x${string}`);
      if (totals.totalClaimed <= totals.totalSettled) continue;
      const settled = await sendSettle(deps.facilitator, network, receiver, token);
      if (!settled.success) {
        fail(deps, outcome, `settle to ${receiver}: ${settled.errorReason} ${settled.errorMessage ?? ''}`.trim());
        continue;
      }
      const amountUsdc = Number(settled.amount || totals.totalClaimed - totals.totalSettled);
      await recordTransfer(deps.db, { channelId: settleTransferKey(receiver, token), kind: 'settle', amountUsdc, txHash: settled.transaction }, deps.now());
      deps.metrics?.settled();
      outcome.settles.push(settled.transaction);
      deps.logger.info({ transaction: settled.transaction, receiver, amountUsdc }, 'settled claimed channel funds to the receiver');
    } catch (err) {
      fail(deps, outcome, `settle to ${receiver}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
}

function fail(deps: ClaimDeps, outcome: ClaimPassOutcome, message: string): void {
  deps.metrics?.failed();
  outcome.failures.push(message);
  deps.logger.warn({ failure: message }, 'channel claim pass: retried on the next pass');
}
