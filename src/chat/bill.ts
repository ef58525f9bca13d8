import type { KeyRow } from '../keys/api-keys.ts';
import { finishReservation, type SettleOutcome } from '../ledger/reservations.ts';
import { priceRequest } from '../providers/pricing.ts';
import type { Services } from '../services.ts';
import type { ChatPlan } from './plan.ts';
import type { Usage } from './usage.ts';

/**
 * The money side of one chat request after its reservation: it is finished exactly once, by a
 * settle (charge what was used) or a void (charge nothing). Callers settle or void on their paths
 * and call `voidIfOpen` in a `finally`, so no path can leave the lock behind.
 */
export class RequestBill {
  private finished: Promise<SettleOutcome> | null = null;
  private firstTokenSeen = false;
  private readonly started = performance.now();

  constructor(
    private readonly services: Services,
    readonly key: KeyRow,
    private readonly plan: ChatPlan,
    readonly requestId: string,
  ) {
    services.inflight.add(this);
  }

  get open(): boolean {
    return this.finished === null;
  }

  settle(usage: Usage, status = 'ok'): Promise<SettleOutcome> {
    const { chargeUsdc, costUsdc } = priceRequest(this.plan.model, usage);
    return this.finish(chargeUsdc, costUsdc, usage, status);
  }

  void(status: string): Promise<SettleOutcome> {
    return this.finish(0, 0, { promptTokens: 0, completionTokens: 0, reasoningTokens: 0, cachedTokens: 0, estimated: false }, status);
  }

  async voidIfOpen(status: string): Promise<void> {
    if (this.open) await this.void(status);
  }

  /** The provider answered with headers. */
  markUpstreamResponse(): void {
    this.services.metrics.upstreamLatency.observe(this.labels(), (performance.now() - this.started) / 1000);
  }

  /** A stream's first content chunk arrived. */
  markFirstToken(): void {
    if (this.firstTokenSeen) return;
    this.firstTokenSeen = true;
    this.services.metrics.timeToFirstToken.observe(this.labels(), (performance.now() - this.started) / 1000);
  }

  private labels() {
    return { provider: this.plan.model.provider, model: this.plan.model.id };
  }

  private record(chargeUsdc: number, usage: Usage, status: string): void {
    const m = this.services.metrics;
    const model = this.plan.model.id;
    m.chatLatency.observe({ model, stream: String(this.plan.stream), outcome: status }, (performance.now() - this.started) / 1000);
    if (usage.promptTokens) m.tokens.inc({ model, kind: 'prompt' }, usage.promptTokens);
    if (usage.completionTokens) m.tokens.inc({ model, kind: 'completion' }, usage.completionTokens);
    if (chargeUsdc) m.chargedUsdc.inc({ model }, chargeUsdc);
  }

  private finish(chargeUsdc: number, costUsdc: number, usage: Usage, status: string): Promise<SettleOutcome> {
    if (this.finished === null) {
      this.record(chargeUsdc, usage, status);
      this.services.inflight.delete(this);
    }
    this.finished ??= finishReservation(this.services.storage, this.requestId, chargeUsdc, {
      requestId: this.requestId,
      apiKeyId: this.key.id,
      wallet: this.key.wallet,
      model: this.plan.model.id,
      provider: this.plan.model.provider,
      ...usage,
      providerCostUsdc: costUsdc,
      status,
      latencyMs: Math.round(performance.now() - this.started),
    });
    return this.finished;
  }
}
