import type { Kysely } from 'kysely';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Database } from '../storage/schema.ts';

/**
 * Prometheus metrics (prom-client). Counters and histograms are updated on the request path;
 * the money gauges are read from the database when scraped, so every instance reports the shared
 * truth (locked money, reservations in flight, the reconciler's backlog) and not a local guess.
 */
export interface Metrics {
  registry: Registry;
  requests: Counter<'method' | 'route' | 'status'>;
  chatLatency: Histogram<'model' | 'stream' | 'outcome'>;
  upstreamLatency: Histogram<'provider' | 'model'>;
  timeToFirstToken: Histogram<'provider' | 'model'>;
  tokens: Counter<'model' | 'kind'>;
  chargedUsdc: Counter<'model'>;
  /** Settles whose charge the provider's usage put above the request's reservation (a defect). */
  overReservation: Counter<'model'>;
  overReservationUsdc: Counter<'model'>;
  /** Delivered (streamed) answers that could be neither settled nor spooled: revenue lost, see the log. */
  unbilledAnswers: Counter<'model'>;
  unbilledUsdc: Counter<'model'>;
  topups: Counter<'outcome'>;
  uptoUnsettled: Counter<string>;
  uptoSettlesResent: Counter<string>;
  uptoSettlesStuck: Gauge<string>;
  /** x402 batch-settlement channels' background claims (src/payments/channels/claims/). */
  channelClaims: Counter<string>;
  channelClaimedUsdc: Counter<string>;
  channelClaimFailures: Counter<string>;
  channelSettles: Counter<string>;
  channelWithdrawalsSeen: Counter<string>;
  rateLimited: Counter<'scope'>;
  /** Calls to each deployment (src/routing/), retries included. */
  deploymentAttempts: Counter<'deployment'>;
  /** Failed calls, by the provider's status or the transport error's code. */
  deploymentFailures: Counter<'deployment' | 'reason'>;
  /** Moves from a failed deployment to the next one. */
  deploymentFallbacks: Counter<'from' | 'to'>;
  /** Times a deployment entered its cooldown. */
  deploymentCooldowns: Counter<'deployment'>;
  /** Passes of the ledger-check checkpoint job that stored nothing: `problems` (the ledger fails a check) or `error` (it could not run). */
  ledgerCheckFailures: Counter<'reason'>;
}

const SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export function createMetrics(db: Kysely<Database>): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'tollgate_process_' });
  const registers = [registry];
  const gauge = (name: string, help: string, read: () => Promise<number>) =>
    new Gauge({
      name,
      help,
      registers,
      async collect() {
        this.set(await read());
      },
    });
  // Read from the shared table: what payers' channels owe this gateway and no claim has taken yet (all instances).
  // Read from the shared table on every instance: alert when it grows past a few periods (docs/operations.md, "Ledger-check checkpoints").
  gauge('tollgate_ledger_checkpoint_age_seconds', 'Seconds since the boundary of the latest passing ledger-check checkpoint (-1: none yet)', async () => {
    const latest = await db.selectFrom('ledger_checkpoints').select('at').orderBy('at', 'desc').limit(1).executeTakeFirst();
    return latest ? (Date.now() - Number(latest.at)) / 1000 : -1;
  });
  gauge('tollgate_channel_unclaimed_usdc', 'Micro-USDC charged to batch-settlement channels and not yet claimed on chain', async () =>
    Number(
      (
        await db
          .selectFrom('channels')
          .select((eb) => eb.fn.coalesce(eb.fn.sum<number>(eb('charged_usdc', '-', eb.ref('total_claimed_usdc'))), eb.lit(0)).as('n'))
          .executeTakeFirst()
      )?.n ?? 0,
    ),
  );
  gauge('tollgate_reservations_in_flight', 'Chat reservations pending (all instances)', async () =>
    Number(
      (
        await db
          .selectFrom('reservations')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('status', '=', 'pending')
          .executeTakeFirst()
      )?.n ?? 0,
    ),
  );
  gauge('tollgate_locked_usdc', 'Micro-USDC locked by reservations in flight (all instances)', async () =>
    Number(
      (
        await db
          .selectFrom('wallets')
          .select((eb) => eb.fn.sum<number>('locked_usdc').as('n'))
          .executeTakeFirst()
      )?.n ?? 0,
    ),
  );
  gauge('tollgate_reconciler_backlog', 'Top-up payments not yet credited or closed', async () =>
    Number(
      (
        await db
          .selectFrom('payments')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('status', 'in', ['pending', 'submitted'])
          .executeTakeFirst()
      )?.n ?? 0,
    ),
  );
  return {
    registry,
    requests: new Counter({
      name: 'tollgate_http_requests_total',
      help: 'HTTP requests by route and status',
      labelNames: ['method', 'route', 'status'],
      registers,
    }),
    chatLatency: new Histogram({
      name: 'tollgate_chat_duration_seconds',
      help: 'Chat request duration, reservation to settlement',
      labelNames: ['model', 'stream', 'outcome'],
      buckets: SECONDS,
      registers,
    }),
    upstreamLatency: new Histogram({
      name: 'tollgate_upstream_response_seconds',
      help: 'Time until the provider answered with headers',
      labelNames: ['provider', 'model'],
      buckets: SECONDS,
      registers,
    }),
    timeToFirstToken: new Histogram({
      name: 'tollgate_time_to_first_token_seconds',
      help: 'Streams: time until the first content chunk',
      labelNames: ['provider', 'model'],
      buckets: SECONDS,
      registers,
    }),
    tokens: new Counter({ name: 'tollgate_tokens_total', help: 'Tokens billed, by kind (prompt, completion)', labelNames: ['model', 'kind'], registers }),
    chargedUsdc: new Counter({
      name: 'tollgate_charged_usdc_total',
      help: 'Micro-USDC charged for chat (what the ledger charged, after the settle)',
      labelNames: ['model'],
      registers,
    }),
    overReservation: new Counter({
      name: 'tollgate_charge_over_reservation_total',
      help: 'Chat settles priced above their reservation (provider usage beyond the bound)',
      labelNames: ['model'],
      registers,
    }),
    overReservationUsdc: new Counter({
      name: 'tollgate_charge_over_reservation_usdc_total',
      help: 'Micro-USDC by which those charges exceeded their reservations',
      labelNames: ['model'],
      registers,
    }),
    unbilledAnswers: new Counter({
      name: 'tollgate_unbilled_answers_total',
      help: 'Delivered answers that could not be billed (database down and settle spool unwritable)',
      labelNames: ['model'],
      registers,
    }),
    unbilledUsdc: new Counter({
      name: 'tollgate_unbilled_usdc_total',
      help: 'Micro-USDC those unbilled answers were priced at',
      labelNames: ['model'],
      registers,
    }),
    topups: new Counter({ name: 'tollgate_topups_total', help: 'Top-up attempts by outcome', labelNames: ['outcome'], registers }),
    // An upto answer is delivered before it is paid: each one whose settle then failed is a loss until retried or written off.
    uptoUnsettled: new Counter({
      name: 'tollgate_upto_unsettled_total',
      help: 'x402 upto payments whose settle failed after their answer was delivered (see tollgate admin ledger-check)',
      registers,
    }),
    // A dropped settle is sent again by the reconciler; one that stays settling this long needs a look (ledger-check lists it).
    uptoSettlesResent: new Counter({
      name: 'tollgate_upto_settles_resent_total',
      help: 'x402 upto settles the node dropped, sent again by the reconciler',
      registers,
    }),
    uptoSettlesStuck: new Gauge({
      name: 'tollgate_upto_settles_stuck',
      help: 'x402 upto payments settling for over 10 minutes, at the last reconciler pass (see tollgate admin ledger-check)',
      registers,
    }),
    channelClaims: new Counter({
      name: 'tollgate_channel_claims_total',
      help: 'x402 batch-settlement claimWithSignature transactions sent by the background claimer (each covers many channels)',
      registers,
    }),
    channelClaimedUsdc: new Counter({ name: 'tollgate_channel_claimed_usdc_total', help: 'Micro-USDC of channel charges claimed on chain', registers }),
    // A failed claim is retried on the next pass; failures that persist while a payer withdraws lose what was served.
    channelClaimFailures: new Counter({
      name: 'tollgate_channel_claim_failures_total',
      help: 'Channel claims or settles that failed (facilitator or chain unavailable, refused); retried on the next pass',
      registers,
    }),
    channelSettles: new Counter({ name: 'tollgate_channel_settles_total', help: 'Settles sweeping claimed channel funds to the receiver', registers }),
    channelWithdrawalsSeen: new Counter({
      name: 'tollgate_channel_withdrawals_seen_total',
      help: "Payers' timed channel withdrawals noticed on chain (their outstanding charges are claimed at once)",
      registers,
    }),
    rateLimited: new Counter({ name: 'tollgate_rate_limited_total', help: 'Requests refused by a rate limit', labelNames: ['scope'], registers }),
    deploymentAttempts: new Counter({
      name: 'tollgate_deployment_attempts_total',
      help: 'Provider calls per deployment, retries included',
      labelNames: ['deployment'],
      registers,
    }),
    deploymentFailures: new Counter({
      name: 'tollgate_deployment_failures_total',
      help: 'Failed provider calls per deployment, by HTTP status or transport error code',
      labelNames: ['deployment', 'reason'],
      registers,
    }),
    deploymentFallbacks: new Counter({
      name: 'tollgate_deployment_fallbacks_total',
      help: 'Requests moved from a failed deployment to the next',
      labelNames: ['from', 'to'],
      registers,
    }),
    deploymentCooldowns: new Counter({
      name: 'tollgate_deployment_cooldowns_total',
      help: 'Times a deployment was put in cooldown after repeated failures',
      labelNames: ['deployment'],
      registers,
    }),
    ledgerCheckFailures: new Counter({
      name: 'tollgate_ledger_check_failures_total',
      help: 'Ledger-check checkpoint passes that stored nothing: reason=problems (an invariant failed: look at the error log) or error (it could not run)',
      labelNames: ['reason'],
      registers,
    }),
  };
}

/**
 * Whether the settle spool can be written (1) or not (0), read when scraped. A metric, not a
 * /health check: the spool is needed only while the database is down, so draining an instance for
 * it would turn a disk warning into an outage; but while it is 0, a database outage leaves
 * streamed answers unbilled (tollgate_unbilled_answers_total), so it is worth an alert.
 */
export function watchSpool(metrics: Metrics, writable: () => boolean): void {
  new Gauge({
    name: 'tollgate_settle_spool_writable',
    help: 'Whether the settle spool (kept settles the database could not take) can be written: 1 yes, 0 no',
    registers: [metrics.registry],
    collect() {
      this.set(writable() ? 1 : 0);
    },
  });
}
