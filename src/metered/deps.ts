import { getBalance } from '../ledger/balances.ts';
import { finishReservation } from '../ledger/operations/finish.ts';
import { tryReserve, type ReserveOutcome, type ReserveRequest } from '../ledger/operations/reserve.ts';
import type { SettleOutcome, SettleRecord } from '../ledger/reservations.ts';
import type { DurableSettler } from '../ledger/spool/durable-settle.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { ProviderAdapter } from '../providers/adapter.ts';
import type { Storage } from '../storage/database.ts';
import type { ChatLog } from './sink.ts';
import type { Config } from '../config/schema.ts';
import { missingKeyVariable } from '../providers/provider-keys.ts';
import type { ChainSettings } from '../routing/attempts.ts';
import { CooldownBoard } from '../routing/cooldown.ts';

/** The metrics a chat request records: latency, first token, tokens, charges, over-reservations. */
export type ChatMetrics = Pick<
  Metrics,
  | 'chatLatency'
  | 'upstreamLatency'
  | 'timeToFirstToken'
  | 'tokens'
  | 'chargedUsdc'
  | 'overReservation'
  | 'overReservationUsdc'
  | 'deploymentAttempts'
  | 'deploymentFailures'
  | 'deploymentFallbacks'
  | 'deploymentCooldowns'
>;

/** A chat request holding a reservation: its lease is renewed, and a shutdown can cut it short. */
export interface InflightRequest {
  readonly requestId: string;
  cutShort(status: string): Promise<void>;
}

/**
 * Everything the chat core (run, bill, stream, complete) uses of a running gateway, and nothing
 * more: it never sees the whole Services container, so what a request can touch is read here, and
 * a test can hand it fakes. Built once per gateway (createChatDeps), so two gateways in one process
 * (tests run several) share no state, not even the drain budget.
 */
export interface ChatDeps {
  /** The adapter of each configured provider, by name. */
  readonly providers: ReadonlyMap<string, ProviderAdapter>;
  /** Locks a request's bound on its wallet, for `leaseMs` (renewed while the request runs). */
  reserve(request: Omit<ReserveRequest, 'leaseMs'>): Promise<ReserveOutcome>;
  /** How long a reservation is held without renewal before a sweeper may void it. */
  readonly leaseMs: number;
  /**
   * Finishes a reservation exactly as the bill decided: a charge goes through the durable settler
   * (retried, then spooled through a database outage, so a produced answer is billed once); nothing
   * to charge is a plain void, which needs no spool (the sweeper releases it after the lease).
   */
  finish(record: SettleRecord, opts: { lateIfReleased: boolean }): Promise<SettleOutcome>;
  /** The wallet's balance, for an answer's header when the settle did not report one. */
  balance(wallet: string): Promise<number>;
  readonly metrics: ChatMetrics;
  /** The gateway's logger, for what is not about one request's connection (pricing anomalies). */
  readonly log: ChatLog & { error(fields: Record<string, unknown>, message: string): void };
  /** The requests holding a reservation on this gateway: renewed by one timer, cut by a shutdown. */
  readonly inflight: Set<InflightRequest>;
  /** How many disconnected streams this gateway may drain at once, and for how long each. */
  readonly drains: DrainBudget;
  /** How long a streaming client may accept no byte before it is cut and treated as gone. */
  readonly idleTimeoutMs: number;
  /**
   * `chat.streamErrorsAsStatus`: a stream's headers wait for a deployment's 200, so a stream none
   * served is an HTTP error; false (the spec): they go out before the upstream call.
   */
  readonly streamErrorsAsStatus: boolean;
  /** Fallbacks, retries and cooldowns over a model's deployments (src/routing/). */
  readonly routing: RoutingDeps;
}

/** What the attempt chain reads: its settings, this gateway's cooldowns, and which providers lack their key. */
export interface RoutingDeps {
  /** The chain's settings, with `deadline` counted from the request's first attempt. */
  settings(): Omit<ChainSettings, 'deadline'> & { deadlineMs: number };
  readonly cooldown: CooldownBoard;
  /** The environment variable a provider's key should be in, when it is unset; null when it has its key (or needs none). */
  missingKey(provider: string): string | null;
}

/**
 * Drains of streams whose client left: the provider's answer is read to its end so what it produced
 * is billed, but each drain holds a provider connection, so only `max` run at once (beyond that the
 * upstream call is aborted and what was produced is billed at once) and each lasts `timeoutMs`.
 */
export class DrainBudget {
  private active = 0;

  constructor(
    readonly max: number,
    readonly timeoutMs: number,
  ) {}

  /** A slot for one drain, or null when all are taken; call the returned release exactly once. */
  tryStart(): (() => void) | null {
    if (this.active >= this.max) return null;
    this.active++;
    return () => void this.active--;
  }
}

/**
 * What createChatDeps reads: the running gateway's pieces, by the names the Services container
 * gives them (services.ts passes the container itself; this module never imports it).
 */
export interface ChatDepsSources {
  readonly storage: Pick<Storage, 'writeUnit' | 'engine' | 'db'>;
  readonly settler: Pick<DurableSettler, 'settle'>;
  readonly providers: ReadonlyMap<string, ProviderAdapter>;
  readonly metrics: ChatMetrics;
  readonly logger: ChatDeps['log'];
  readonly inflight: Set<InflightRequest>;
  readonly config: Pick<Config, 'providers' | 'secrets'> & {
    readonly chat: Pick<
      Config['chat'],
      | 'reservationLeaseSeconds'
      | 'maxConcurrentDrains'
      | 'drainTimeoutSeconds'
      | 'idleTimeoutSeconds'
      | 'streamErrorsAsStatus'
      | 'retries'
      | 'retryBackoffMs'
      | 'maxRetryAfterSeconds'
      | 'attemptDeadlineSeconds'
      | 'cooldown'
    >;
  };
}

/**
 * The port over the gateway's pieces. They are read when used, not copied here, as the chat core
 * did when it took the whole container: a piece replaced while the gateway runs (a test swaps in a
 * settler whose database loses answers) is the one the next request uses. The drain budget is the
 * port's own state, one per gateway.
 */
export function createChatDeps(s: ChatDepsSources): ChatDeps {
  const chat = () => s.config.chat;
  return {
    get providers() {
      return s.providers;
    },
    get leaseMs() {
      return chat().reservationLeaseSeconds * 1000;
    },
    reserve: (request) => tryReserve(s.storage, { ...request, leaseMs: chat().reservationLeaseSeconds * 1000 }),
    finish: (record, opts) => (record.chargeUsdc > 0 ? s.settler.settle(record, opts) : finishReservation(s.storage, record.requestId, 0, record.usage)),
    balance: async (wallet) => (await getBalance(s.storage.db, wallet)).balance_usdc,
    get metrics() {
      return s.metrics;
    },
    get log() {
      return s.logger;
    },
    inflight: s.inflight,
    drains: new DrainBudget(chat().maxConcurrentDrains, chat().drainTimeoutSeconds * 1000),
    get idleTimeoutMs() {
      return chat().idleTimeoutSeconds * 1000;
    },
    get streamErrorsAsStatus() {
      return chat().streamErrorsAsStatus;
    },
    routing: {
      settings: () => ({
        retries: chat().retries,
        backoffMs: chat().retryBackoffMs,
        maxRetryAfterMs: chat().maxRetryAfterSeconds * 1000,
        deadlineMs: chat().attemptDeadlineSeconds * 1000,
      }),
      // One board per gateway: two gateways in one process (tests) keep their own cooldowns.
      cooldown: new CooldownBoard(() => {
        const c = chat().cooldown;
        return { failures: c.failures, windowMs: c.windowSeconds * 1000, cooldownMs: c.seconds * 1000 };
      }),
      missingKey: (provider) => missingKeyVariable(s.config, provider),
    },
  };
}
