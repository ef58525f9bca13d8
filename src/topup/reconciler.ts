import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { PublicClient } from 'viem';
import type { Database } from '../storage/schema.ts';
import { creditPayment, markFailed, openPayments } from './payment-store.ts';
import { inspect } from './settle-payment.ts';

export interface ReconcileDeps {
  db: Kysely<Database>;
  clientFor(network: string): PublicClient | undefined;
  logger: Logger;
  now: () => number;
}

export interface ReconcileReport {
  credited: number;
  failed: number;
  stillOpen: number;
}

/**
 * Finishes payments a crash or a timeout left open, from the chain's own record. Every step is safe
 * to run concurrently with live requests and with other instances: crediting happens exactly once
 * (see creditPayment), and a payment is failed only when its authorization can never pay us.
 */
export async function reconcilePayments(deps: ReconcileDeps): Promise<ReconcileReport> {
  const report: ReconcileReport = { credited: 0, failed: 0, stillOpen: 0 };
  for (const payment of await openPayments(deps.db)) {
    const client = deps.clientFor(payment.network);
    if (!client) {
      report.stillOpen++;
      continue;
    }
    try {
      const outcome = await inspect({ db: deps.db, client, now: deps.now }, payment);
      if (outcome.state === 'settled') {
        const row = await creditPayment(deps.db, payment.id, outcome.txHash, deps.now());
        if (row.status === 'credited') {
          report.credited++;
          deps.logger.info({ payment: payment.id, tx: outcome.txHash, credited_usdc: row.amount_usdc }, 'reconciler credited a settled payment');
        }
      } else if (outcome.state === 'void') {
        await markFailed(deps.db, payment.id, outcome.reason);
        report.failed++;
        deps.logger.info({ payment: payment.id, reason: outcome.reason }, 'reconciler closed a payment that cannot settle');
      } else {
        report.stillOpen++;
      }
    } catch (err) {
      report.stillOpen++;
      deps.logger.warn({ payment: payment.id, err: (err as Error).message }, 'reconciler could not read the chain; will retry');
    }
  }
  return report;
}
