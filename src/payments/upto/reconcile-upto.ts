import type { Hex } from 'viem';
import { UPTO_SETTLE_STUCK_MS } from '../../ledger/upto-check.ts';
import { inspectOnChain } from '../onchain.ts';
import { claimSend, closeSettled, countSettlingSince, markUnsettled, reopenUnsettled, stillCollectable, uptoPaymentsIn } from './upto-store.ts';
import { findPayment, isClaimedByOther, type PaymentRow } from '../payment-store.ts';
import { recordArrival, sendCharge, settleUpto, type UptoSettleDeps } from './settle-upto.ts';
import { UPTO_SETTLE_MARGIN_SECONDS } from './admission.ts';

/** What the reconciler reports besides unsettled payments: tollgate_upto_settles_resent_total and tollgate_upto_settles_stuck. */
export interface UptoReconcileMetrics {
  resent(): void;
  stuck(count: number): void;
}

export interface UptoFinishDeps extends UptoSettleDeps {
  now: () => number;
  metrics?: UptoReconcileMetrics;
}

export interface UptoReconcileDeps extends UptoFinishDeps {
  /** A payment untouched this long is no longer being worked on by its request (the settle wait). */
  staleMs: number;
}

/**
 * Finishes upto payments a crash, a timeout, a dropped transaction or an outage left open, from
 * the chain's own record and the database (never this process's memory, so any instance, after
 * any restart, finishes them). The exact reconciler compares the chain with a payment's signed
 * amount; for upto that is the maximum, so these rows are read here against
 * `settle_amount_atomic`, the charge, and never sent again for another amount:
 * - holding: the request died (the sweeper voids its reservation) or its settle was spooled; once the
 *   hold wallet is unlocked, the charge is fixed and settled;
 * - settling: what the chain shows for the authorization decides (finishSettling);
 * - unsettled, its authorization still valid: tried again, so a payer who restored their balance
 *   and Permit2 allowance is collected and freed without waiting for the operator (what-restores.ts).
 */
export async function reconcileUpto(deps: UptoReconcileDeps): Promise<void> {
  const before = deps.now() - deps.staleMs;
  for (const p of await uptoPaymentsIn(deps.db, ['holding'], before)) {
    await settleUpto(deps, p.id).catch((err: unknown) =>
      deps.logger.warn({ payment: p.id, err: (err as Error).message }, 'could not settle an upto payment; will retry'),
    );
  }
  for (const p of await uptoPaymentsIn(deps.db, ['settling'], before)) {
    await finishSettling(deps, p).catch((err: unknown) =>
      deps.logger.warn({ payment: p.id, err: (err as Error).message }, 'could not read the chain for an upto payment; will retry'),
    );
  }
  const validPast = Math.floor(deps.now() / 1000) + UPTO_SETTLE_MARGIN_SECONDS;
  for (const p of await stillCollectable(deps.db, validPast, before)) {
    await collectAgain(deps, p).catch((err: unknown) =>
      deps.logger.warn({ payment: p.id, err: (err as Error).message }, 'could not settle an unsettled upto payment again; will retry'),
    );
  }
  deps.metrics?.stuck(await countSettlingSince(deps.db, deps.now() - UPTO_SETTLE_STUCK_MS));
}

/** An unsettled payment tried again while its authorization is valid; counted once, when it first became unsettled. */
async function collectAgain(deps: UptoFinishDeps, p: PaymentRow): Promise<void> {
  if (!(await reopenUnsettled(deps.db, p.id, deps.now()))) return;
  await finishSettling({ ...deps, countUnsettled: () => {} }, await findPayment(deps.db, p.id));
  const after = await findPayment(deps.db, p.id);
  if (after.upto_state !== 'settled') return;
  deps.logger.info({ payment: p.id, payer: p.payer }, 'unsettled upto payment collected after its payer restored the wallet');
}

/** One `settling` payment, from what the chain shows for its authorization (also `tollgate admin upto retry`). */
export async function finishSettling(deps: UptoFinishDeps, p: PaymentRow): Promise<void> {
  const client = deps.clientFor(p.network);
  if (!client || p.settle_amount_atomic === null) return;
  if (p.settle_amount_atomic === '0') {
    await sendCharge(deps, p);
    return;
  }
  // The chain is searched for a transfer of the charge, not of the signed maximum.
  const facts = { ...p, amount_atomic: p.settle_amount_atomic };
  const outcome = await inspectOnChain(client, facts, {
    nowSeconds: Math.floor(deps.now() / 1000),
    isClaimed: (tx) => isClaimedByOther(deps.db, p.id, p.network, tx),
  });
  switch (outcome.state) {
    case 'settled':
      if (outcome.amountAtomic.toString() === p.settle_amount_atomic) await closeSettled(deps.db, p.id, outcome.amountAtomic, outcome.txHash);
      else await recordArrival(deps, p, outcome.txHash as Hex);
      return;
    case 'open':
      // Never sent (a stop before the send, a refused send): sent now, by one instance.
      if (await claimSend(deps.db, p, deps.now())) await sendCharge(deps, await findPayment(deps.db, p.id));
      return;
    case 'dropped':
      await sendAgain(deps, p);
      return;
    case 'void':
      if (await markUnsettled(deps.db, p.id, `not settled: ${outcome.reason}`)) deps.countUnsettled();
      return;
    case 'in-flight':
    case 'used-unconfirmed':
      await giveUpIfStuck(deps, p);
      return;
  }
}

/** Slack after the authorization's deadline before a settle is given up (a block, clocks), as inspectOnChain's. */
const STUCK_MARGIN_SECONDS = 60;

const pastDeadline = (deps: { now: () => number }, p: PaymentRow) => deps.now() / 1000 > p.valid_before + STUCK_MARGIN_SECONDS;

/**
 * The node no longer knows the settle's transaction (evicted from its pool, restarted) and the
 * authorization is unused: nothing will collect the charge unless it is sent again. Sent again
 * (the same amount, a new transaction) while the authorization is valid, by the one instance that
 * claims it. Too close to the deadline to send again, the dropped transaction may still come back
 * from another node and pay, so the row stays `settling` (each pass reads the chain for its hash
 * and the transfer first) and is recorded unsettled for the operator only once the deadline has
 * passed by STUCK_MARGIN_SECONDS, when Permit2 refuses it and nothing can pay any more.
 */
async function sendAgain(deps: UptoFinishDeps, p: PaymentRow): Promise<void> {
  if (deps.now() / 1000 > p.valid_before - UPTO_SETTLE_MARGIN_SECONDS) {
    if (!pastDeadline(deps, p)) return;
    const reason = `its settle ${p.tx_hash} was dropped by the node and the authorization expired before it could be sent again`;
    if (await markUnsettled(deps.db, p.id, reason)) {
      deps.countUnsettled();
      deps.logger.warn({ payment: p.id, payer: p.payer, tx: p.tx_hash }, 'upto settle dropped past its deadline: unsettled (tollgate admin upto write-off)');
    }
    return;
  }
  if (!(await claimSend(deps.db, p, deps.now()))) return;
  deps.metrics?.resent();
  deps.logger.warn({ payment: p.id, payer: p.payer, dropped: p.tx_hash }, 'upto settle dropped by the node: sending the charge again');
  await sendCharge(deps, await findPayment(deps.db, p.id));
}

/**
 * The relayer's fee bump (src/payments/relayer/) replaces stuck transactions of exact payments
 * only. An upto settle still unmined past its authorization's deadline can no longer pay: Permit2
 * refuses it once mined. It is recorded `unsettled`, so the operator sees it (the metric, the log,
 * ledger-check) and the payer is not left refused as "busy" with nobody told; until the deadline,
 * the payer's next upto request is a 409 UPTO_BUSY (bounded by topup.maxTimeoutSeconds).
 */
async function giveUpIfStuck(deps: UptoFinishDeps, p: PaymentRow): Promise<void> {
  if (!pastDeadline(deps, p)) return;
  const reason = `its settle ${p.tx_hash ?? '(no hash recorded)'} was still not mined past the authorization's deadline`;
  if (await markUnsettled(deps.db, p.id, reason)) {
    deps.countUnsettled();
    deps.logger.warn(
      { payment: p.id, payer: p.payer, tx: p.tx_hash },
      'upto settle stuck past its deadline: unsettled (tollgate admin upto retry or write-off)',
    );
  }
}
