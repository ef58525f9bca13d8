import type { Kysely } from 'kysely';
import type { PublicClient } from 'viem';
import type { Database } from '../storage/schema.ts';
import { inspectOnChain, type ChainOutcome } from './onchain.ts';
import {
  creditPayment,
  isClaimedByOther,
  markFailed,
  markSubmitted,
  openPayments,
  releaseDropped,
  paymentsWatchedAfterLetGo,
  releaseUnsent,
  type PaymentRow,
} from './payment-store.ts';

export interface ReconcileDeps {
  db: Kysely<Database>;
  clientFor(network: string): PublicClient | undefined;
  logger: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  now: () => number;
  /**
   * A payment recorded this long ago with no transaction sent is taken as abandoned (its process
   * died between record and broadcast) and released, so the client's retry can settle it. The
   * settle wait: a live request has sent its transaction well before then, and if a slow one still
   * sends later, markSubmitted puts the row back under watch.
   */
  releaseAfterMs: number;
  /**
   * Sends a settlement the node holds unmined again at a higher fee (the local facilitator's
   * replaceStuck); absent with a remote facilitator, whose relayer is someone else's to manage.
   */
  replaceStuck?: (network: string, txHash: string) => Promise<string | null>;
}

export interface ReconcileReport {
  credited: number;
  failed: number;
  released: number;
  stillOpen: number;
}

export type RowOutcome = 'credited' | 'failed' | 'released' | 'open';

/**
 * Finishes payments a crash or a timeout left open, from the chain's own record. Every step is safe
 * to run concurrently with live requests and with other instances: crediting happens exactly once
 * (see creditPayment), and a payment is failed only when its authorization can never pay us.
 */
export async function reconcilePayments(deps: ReconcileDeps): Promise<ReconcileReport> {
  const report: ReconcileReport = { credited: 0, failed: 0, released: 0, stillOpen: 0 };
  for (const payment of await openPayments(deps.db)) {
    const client = deps.clientFor(payment.network);
    if (!client) {
      report.stillOpen++;
      continue;
    }
    try {
      const outcome = await reconcilePayment({ ...deps, client }, payment);
      report[outcome === 'open' ? 'stillOpen' : outcome]++;
    } catch (err) {
      report.stillOpen++;
      deps.logger.warn({ payment: payment.id, err: (err as Error).message }, 'reconciler could not read the chain; will retry');
    }
  }
  for (const payment of await paymentsWatchedAfterLetGo(deps.db, Math.floor(deps.now() / 1000))) {
    const client = deps.clientFor(payment.network);
    if (!client) continue;
    const outcome = await creditIfSettledAfterAll({ ...deps, client }, payment).catch((err: unknown) => {
      deps.logger.warn(
        { payment: payment.id, err: (err as Error).message },
        'reconciler could not read the chain for a payment given up unsettled; will retry',
      );
      return 'open' as const;
    });
    if (outcome === 'credited') report.credited++;
  }
  return report;
}

/**
 * A payment given up unsettled (released, or failed after its settlement reverted: see
 * paymentsWatchedAfterLetGo) is credited if its
 * authorization was used after all with a transfer to payTo; otherwise it stays as it is, and the
 * same payment sent again may still claim it.
 */
async function creditIfSettledAfterAll(deps: Omit<ReconcileDeps, 'clientFor'> & { client: PublicClient }, payment: PaymentRow): Promise<'credited' | 'open'> {
  const outcome = await inspect(deps, payment);
  if (outcome.state !== 'settled') return 'open';
  const row = await creditPayment(deps.db, payment.id, outcome.txHash, outcome.amountAtomic, deps.now());
  if (row.status !== 'credited') return 'open';
  deps.logger.warn(
    { payment: payment.id, tx: outcome.txHash, credited_usdc: row.amount_usdc },
    'a payment given up unsettled (released, or its settlement reverted) was settled on chain after all; credited',
  );
  return 'credited';
}

/** One open payment, from what the chain says now. Throws when the chain cannot be read. */
export async function reconcilePayment(deps: Omit<ReconcileDeps, 'clientFor'> & { client: PublicClient }, payment: PaymentRow): Promise<RowOutcome> {
  const outcome = await inspect(deps, payment);
  if (outcome.state === 'settled') {
    const row = await creditPayment(deps.db, payment.id, outcome.txHash, outcome.amountAtomic, deps.now());
    if (row.status === 'credited') {
      deps.logger.info({ payment: payment.id, tx: outcome.txHash, credited_usdc: row.amount_usdc }, 'reconciler credited a settled payment');
      return 'credited';
    }
    if (row.status === 'failed') deps.logger.warn({ payment: payment.id, tx: outcome.txHash, reason: row.failure_reason }, 'settled payment not credited');
    return row.status === 'failed' ? 'failed' : 'open';
  }
  if (outcome.state === 'void') {
    await markFailed(deps.db, payment.id, outcome.reason);
    deps.logger.info({ payment: payment.id, reason: outcome.reason }, 'reconciler closed a payment that cannot settle');
    return 'failed';
  }
  const stale = deps.now() - Number(payment.updated_at) >= deps.releaseAfterMs;
  // Not before the settle wait: an RPC endpoint whose nodes lag may not show a just-sent transaction yet.
  if (outcome.state === 'dropped' && stale && (await releaseDropped(deps.db, payment, deps.now()))) {
    deps.logger.warn(
      { payment: payment.id, tx: payment.tx_hash },
      'the settlement transaction was dropped before it was mined; released, a retry of the same payment sends it again',
    );
    return 'released';
  }
  // Unmined a whole settle wait after it was sent (or last replaced): priced below the market.
  if (outcome.state === 'in-flight' && stale && deps.replaceStuck && payment.tx_hash) {
    const replacement = await deps.replaceStuck(payment.network, payment.tx_hash).catch((err: unknown) => {
      // Mined or replaced meanwhile (the nonce is used), or the node refused the fee: the next pass looks again.
      deps.logger.warn({ payment: payment.id, tx: payment.tx_hash, err: (err as Error).name }, 'could not replace a settlement that sat unmined');
      return null;
    });
    if (replacement && (await markSubmitted(deps.db, payment.id, replacement, deps.now()))) {
      deps.logger.warn(
        { payment: payment.id, stuck: payment.tx_hash, tx: replacement },
        'a settlement sat unmined; sent again at a higher fee under the same nonce',
      );
    }
    return 'open';
  }
  // Pending: nothing of this attempt was sent (sending moves it to submitted). A hash it holds is an
  // earlier attempt's that paid nothing (reverted, or dropped by the node: kept when the payment
  // was reopened), so the authorization being unused is what counts.
  const unused = outcome.state === 'open' || outcome.state === 'dropped';
  const abandoned = unused && payment.state === 'pending' && stale;
  if (abandoned && (await releaseUnsent(deps.db, payment, deps.now()))) {
    deps.logger.info({ payment: payment.id }, 'released a payment recorded but never sent; a retry of the same payment settles it');
    return 'released';
  }
  return 'open';
}

export function inspect(deps: { db: Kysely<Database>; client: PublicClient; now: () => number }, payment: PaymentRow): Promise<ChainOutcome> {
  return inspectOnChain(deps.client, payment, {
    nowSeconds: Math.floor(deps.now() / 1000),
    isClaimed: (tx) => isClaimedByOther(deps.db, payment.id, payment.network, tx),
  });
}
