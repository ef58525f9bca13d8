import type { KeyRow } from '../keys/api-keys.ts';
import { boundedUsage, MAX_REPORTED_TOKENS } from './bounded-usage.ts';
import type { SettleOutcome, UsageRecord } from '../ledger/reservations.ts';
import { priceRequest, tokenCounts } from '../providers/pricing.ts';
import type { ChatDeps } from './deps.ts';
import type { ChatPlan } from './plan/plan.ts';
import type { Deployment } from '../providers/catalog.ts';
import type { Usage } from '../protocols/internal.ts';

export interface BillOptions {
  /**
   * Never charge more than the reservation, whatever usage the provider reports: a pay-per-request
   * payer was quoted the reservation as the price of this request, and a key with a spend limit was
   * admitted for exactly that much, so a provider that over-reports cannot take more of the wallet,
   * or of the key's limit, than that (the excess is still reported as over-reservation).
   */
  capAtReservation?: boolean;
  /**
   * The least a request that is charged anything pays (micro-USDC, at most its reservation): an
   * x402 upto payment is settled on chain for exactly its charge, and below payPerRequest.minUsd the
   * relayer's gas would cost more than it collects. Applied here, in the bill, so the ledger's
   * charge, the usage row, the answer's charged_usdc and the amount settled are one number. A
   * request charged nothing (voided, or priced at 0) stays at 0 and sends nothing.
   */
  minChargeUsdc?: number;
  /**
   * Told what the finish charged, once it applied, and awaited before the answer's last bytes (a
   * JSON body, a stream's final chunk): an x402 batch-settlement request names its charge in its
   * receipt and commits its channel there (payments/paid-request/batch-settlement.ts), so the
   * client's next request finds the channel free. It must not throw.
   */
  onBilled?(chargedUsdc: number): void | Promise<void>;
}

/**
 * What a bill reads of the request it bills: the model (its prices, names and labels), the
 * reservation it holds, and whether it streams (a stream's content is out before the settle).
 * A chat plan is one; so is an embeddings plan (src/embeddings/plan.ts), billed the same way.
 */
export type BilledPlan = Pick<ChatPlan, 'model' | 'reservationUsdc' | 'stream'>;

const NO_USAGE: Usage = { input: { total: 0, cacheRead: 0, cacheWrite: 0 }, output: { total: 0, reasoning: 0 }, estimated: false };

/**
 * The money side of one chat request after its reservation: it is finished exactly once, by a
 * settle (charge what was used) or a void (charge nothing). Callers settle or void on their paths
 * and call `voidIfOpen` in a `finally`, so no path can leave the lock behind.
 *
 * While the bill is open it is in `deps.inflight`, whose leases are renewed every third of the
 * lease whatever the request is waiting for (a slow provider's first byte, a stream, a drain): the
 * sweeper may only void the reservations of processes that died, never a request still running.
 *
 * A settle (something was produced) goes through the durable settler: if the database does not
 * answer it is retried for a few seconds, then spooled to local disk and applied when the database
 * returns, so an answer the provider produced is billed once even through an outage. A stream's
 * settle is charged even if its reservation was released under it (renewals failed during an
 * outage and the sweeper ran): its content is already out. A void needs no spool: if it fails, the
 * sweeper releases the reservation after the lease.
 */
export class RequestBill {
  private finished: Promise<SettleOutcome> | null = null;
  private firstTokenSeen = false;
  private readonly started = performance.now();
  /** Set by a stream once content can reach the client: the usage of what was produced so far. */
  private producedSoFar: (() => Promise<Usage | null>) | null = null;
  /** The deployment whose answer is being billed, once one answered (src/routing/). */
  private served: Deployment | null = null;

  constructor(
    private readonly deps: ChatDeps,
    readonly key: KeyRow,
    private readonly plan: BilledPlan,
    readonly requestId: string,
    private readonly opts: BillOptions = {},
  ) {
    deps.inflight.add(this);
  }

  get open(): boolean {
    return this.finished === null;
  }

  /**
   * The deployment that answered: the caller still pays the model's listed price, but the
   * platform's cost (and so its revenue) is this deployment's, and the usage row names it.
   */
  servedBy(deployment: Deployment): void {
    this.served = deployment;
  }

  settle(reported: Usage, status = 'ok'): Promise<SettleOutcome> {
    const { usage, clamped } = boundedUsage(reported);
    if (clamped) {
      this.deps.log.error(
        { reqId: this.requestId, model: this.plan.model.id, input: reported.input, output: reported.output },
        `the provider reported more than ${MAX_REPORTED_TOKENS} tokens on one side; billed that many`,
      );
    }
    // The one place usage is priced: each cached part of the prompt at its own price.
    const counts = tokenCounts(usage);
    const { chargeUsdc, costUsdc, cachedPartsIgnored } = priceRequest({ billed: this.plan.model.billed, cost: (this.served ?? this.plan.model).cost }, counts);
    if (cachedPartsIgnored) {
      const { promptTokens, cachedPromptTokens, cacheWriteTokens, cacheReadTokens } = counts;
      this.deps.log.warn(
        { reqId: this.requestId, model: this.plan.model.id, promptTokens, cachedPromptTokens, cacheWriteTokens, cacheReadTokens },
        'the provider reported more cached prompt tokens than prompt tokens; billed every prompt token at the prompt price',
      );
    }
    const capped = this.opts.capAtReservation ? Math.min(chargeUsdc, this.plan.reservationUsdc) : chargeUsdc;
    const floor = Math.min(this.opts.minChargeUsdc ?? 0, this.plan.reservationUsdc);
    const billed = capped > 0 ? Math.max(capped, floor) : 0;
    return this.finish(billed, costUsdc, usage, status, chargeUsdc);
  }

  void(status: string): Promise<SettleOutcome> {
    return this.finish(0, 0, NO_USAGE, status);
  }

  async voidIfOpen(status: string): Promise<void> {
    if (this.open) await this.void(status);
  }

  /** Streams call this before their first byte, so a cut (shutdown) can bill what was delivered. */
  trackProduced(usageSoFar: () => Promise<Usage | null>): void {
    this.producedSoFar = usageSoFar;
  }

  /**
   * The gateway is cutting this request short (shutdown): content that already reached the client
   * is charged (usage estimated from what was produced), and only a request that produced nothing
   * is voided.
   */
  async cutShort(status: string): Promise<void> {
    if (!this.open) return;
    const usage = await this.producedSoFar?.();
    if (usage && usage.output.total > 0) await this.settle(usage, status);
    else await this.voidIfOpen(status);
  }

  /** The provider answered with headers. */
  markUpstreamResponse(): void {
    this.deps.metrics.upstreamLatency.observe(this.labels(), (performance.now() - this.started) / 1000);
  }

  /** A stream's first content chunk arrived. */
  markFirstToken(): void {
    if (this.firstTokenSeen) return;
    this.firstTokenSeen = true;
    this.deps.metrics.timeToFirstToken.observe(this.labels(), (performance.now() - this.started) / 1000);
  }

  private labels() {
    return { provider: (this.served ?? this.plan.model).provider, model: this.plan.model.id };
  }

  /** Metrics from what the finish actually did, never from what was asked of it. */
  private record(outcome: SettleOutcome, usage: Usage, status: string, seconds: number): void {
    const m = this.deps.metrics;
    const model = this.plan.model.id;
    m.chatLatency.observe({ model, stream: String(this.plan.stream), outcome: status }, seconds);
    // A deferred (spooled) settle is counted by the replayer once the ledger has charged it.
    if (!outcome.applied || outcome.deferred) return;
    if (usage.input.total) m.tokens.inc({ model, kind: 'prompt' }, usage.input.total);
    if (usage.output.total) m.tokens.inc({ model, kind: 'completion' }, usage.output.total);
    if (outcome.chargedUsdc) m.chargedUsdc.inc({ model }, outcome.chargedUsdc);
  }

  /**
   * The reservation is meant to be an upper bound of the charge, so a charge above it means the
   * provider reported more than the request could have used (or the bound is wrong): an error for
   * the operator to investigate, whatever the balance allowed us to charge.
   */
  private reportOverReservation(chargeUsdc: number, outcome: SettleOutcome): void {
    const reservedUsdc = this.plan.reservationUsdc;
    if (chargeUsdc <= reservedUsdc || outcome.deferred) return;
    const model = this.plan.model.id;
    this.deps.metrics.overReservation.inc({ model });
    this.deps.metrics.overReservationUsdc.inc({ model }, chargeUsdc - reservedUsdc);
    this.deps.log.error(
      { reqId: this.requestId, model, reservedUsdc, chargeUsdc, chargedUsdc: outcome.chargedUsdc },
      'the provider reported usage priced above the reservation; charged what the balance allowed (see tollgate admin ledger-check)',
    );
  }

  /**
   * The settle failed (the database and the spool both refused it): a non-streaming answer is then
   * withheld, so nothing may be charged; its reservation is released now if the database answers
   * this void, else by the sweeper once its lease (no longer renewed) runs out. A stream's content
   * is out: its reservation is left to the settler's report (it logged and counted the loss).
   */
  private async releaseWithheld(err: unknown, record: UsageRecord): Promise<never> {
    if (!this.plan.stream) {
      const nothing: UsageRecord = { ...record, ...NO_USAGE, providerCostUsdc: 0, status: 'unbilled' };
      await this.deps
        .finish({ requestId: this.requestId, wallet: this.key.wallet, chargeUsdc: 0, usage: nothing }, { lateIfReleased: false })
        .catch(() => undefined);
    }
    throw err;
  }

  /** `pricedUsdc`: what the usage is worth, when a cap billed less (reported if above the reservation). */
  private finish(chargeUsdc: number, costUsdc: number, usage: Usage, status: string, pricedUsdc = chargeUsdc): Promise<SettleOutcome> {
    if (this.finished) return this.finished;
    this.deps.inflight.delete(this);
    const seconds = (performance.now() - this.started) / 1000;
    const record: UsageRecord = {
      requestId: this.requestId,
      apiKeyId: this.key.id,
      wallet: this.key.wallet,
      model: this.plan.model.id,
      provider: this.plan.model.provider,
      deployment: this.served?.id ?? null,
      // The usage row records the prompt and output totals and the parts of each that are
      // reported apart: cache reads of either provider type, and reasoning.
      promptTokens: usage.input.total,
      completionTokens: usage.output.total,
      reasoningTokens: usage.output.reasoning,
      cachedTokens: usage.input.cacheRead,
      estimated: usage.estimated,
      providerCostUsdc: costUsdc,
      status,
      latencyMs: Math.round(seconds * 1000),
    };
    const settled = { requestId: this.requestId, wallet: this.key.wallet, chargeUsdc, usage: record };
    const finishing = this.deps
      .finish(settled, { lateIfReleased: this.plan.stream })
      .catch((err) => (chargeUsdc > 0 ? this.releaseWithheld(err, record) : Promise.reject(err)));
    this.finished = finishing.then(async (outcome) => {
      this.record(outcome, usage, status, seconds);
      this.reportOverReservation(pricedUsdc, outcome);
      await this.opts.onBilled?.(outcome.applied ? outcome.chargedUsdc : 0);
      if (outcome.shortfallUsdc > 0) {
        this.deps.log.warn({ reqId: this.requestId, shortfall: outcome.shortfallUsdc }, 'charge exceeded the available balance; charged what was available');
      }
      return outcome;
    });
    return this.finished;
  }
}
