import type { Hex } from 'viem';
import { inspectOnChain } from '../onchain.ts';
import { closeSettled, markUnsettled, uptoPaymentsIn } from './upto-store.ts';
import { isClaimedByOther, type PaymentRow } from '../payment-store.ts';
import { recordArrival, sendCharge, settleUpto, type UptoSettleDeps } from './settle-upto.ts';

export interface UptoReconcileDeps extends UptoSettleDeps {
  now: () => number;
  /** A payment untouched this long is no longer being worked on by its request (the settle wait). */
  staleMs: number;
}

/**
 * Finishes upto payments a crash, a timeout or an outage left open, from the chain's own record
 * (design step 6). The exact reconciler compares the chain with a payment's signed amount; for upto
 * that is the maximum, so these rows are read here against `settle_amount_atomic`, the charge, and
 * never sent again for another amount:
 * - holding: the request died (the sweeper voids its reservation) or its settle was spooled; once the
 *   hold wallet is unlocked, the charge is fixed and settled;
 * - settling: what the chain shows for the authorization decides. Settled: its amount must be the
 *   charge. Unused and still valid, or dropped: the same amount is sent again. Expired unused:
 *   unsettled. In flight: wait.
 */
export async function reconcileUpto(deps: UptoReconcileDeps): Promise<void> {
  const before = deps.now() - deps.staleMs;
  for (const p of await uptoPaymentsIn(deps.db, ['holding'], before)) {
    await settleUpto(deps, p.id).catch((err: unknown) => deps.logger.warn({ payment: p.id, err: (err as Error).message }, 'could not settle an upto payment; will retry'));
  }
  for (const p of await uptoPaymentsIn(deps.db, ['settling'], before)) {
    await finishSettling(deps, p).catch((err: unknown) => deps.logger.warn({ payment: p.id, err: (err as Error).message }, 'could not read the chain for an upto payment; will retry'));
  }
}

/** One `settling` payment, from what the chain shows for its authorization (also `tollgate admin upto retry`). */
export async function finishSettling(deps: UptoSettleDeps & { now: () => number }, p: PaymentRow): Promise<void> {
  const client = deps.clientFor(p.network);
  if (!client || p.settle_amount_atomic === null) return;
  if (p.settle_amount_atomic === '0') {
    await sendCharge(deps, p);
    return;
  }
  // The chain is searched for a transfer of the charge, not of the signed maximum.
  const facts = { ...p, amount_atomic: p.settle_amount_atomic };
  const outcome = await inspectOnChain(client, facts, { nowSeconds: Math.floor(deps.now() / 1000), isClaimed: (tx) => isClaimedByOther(deps.db, p.id, p.network, tx) });
  switch (outcome.state) {
    case 'settled':
      if (outcome.amountAtomic.toString() === p.settle_amount_atomic) await closeSettled(deps.db, p.id, outcome.amountAtomic, outcome.txHash);
      else await recordArrival(deps, p, outcome.txHash as Hex);
      return;
    case 'open':
    case 'dropped':
      // Never sent, or sent and lost: the authorization is unused, so the same amount is sent again.
      await sendCharge(deps, p);
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

/** Slack after the authorization's deadline before a still-unmined settle is given up (a block, clocks), as inspectOnChain's. */
const STUCK_MARGIN_SECONDS = 60;

/**
 * The relayer's fee bump (src/payments/relayer/) replaces stuck transactions of exact payments
 * only. An upto settle still unmined past its authorization's deadline can no longer pay: Permit2
 * refuses it once mined. It is recorded `unsettled`, so the operator sees it (the metric, the log,
 * ledger-check) and the payer is not left refused as "busy" with nobody told; until the deadline,
 * the payer's next upto request is a 409 UPTO_BUSY (bounded by topup.maxTimeoutSeconds).
 */
async function giveUpIfStuck(deps: UptoSettleDeps & { now: () => number }, p: PaymentRow): Promise<void> {
  if (deps.now() / 1000 <= p.valid_before + STUCK_MARGIN_SECONDS) return;
  const reason = `its settle ${p.tx_hash ?? '(no hash recorded)'} was still not mined past the authorization's deadline`;
  if (await markUnsettled(deps.db, p.id, reason)) {
    deps.countUnsettled();
    deps.logger.warn({ payment: p.id, payer: p.payer, tx: p.tx_hash }, 'upto settle stuck past its deadline: unsettled (tollgate admin upto retry or write-off)');
  }
}
