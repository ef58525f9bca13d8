import { setTimeout as sleep } from 'node:timers/promises';
import { retryDelayMs } from './backoff.ts';
import type { FailureAction } from './classify.ts';
import type { CooldownBoard } from './cooldown.ts';
import { orderByWeight, type RoutedTarget } from './order.ts';

/** What one attempt on one deployment came to. */
export type AttemptOutcome<T, E> = { ok: true; value: T } | AttemptFailure<E>;

export interface AttemptFailure<E> {
  ok: false;
  action: FailureAction;
  /** The provider's HTTP status, when it answered. */
  status?: number;
  /** The transport error's code, when it did not (or a code of the caller's, such as a missing key). */
  code?: string;
  /** The provider's Retry-After, in milliseconds. */
  retryAfterMs?: number;
  /** What the caller makes of it if this is the last failure (an error to answer with). */
  error: E;
}

/** What the runner reports, for logs and metrics; every method optional. */
export interface ChainObserver<D> {
  attempt?(target: D, retry: number): void;
  failed?(target: D, failure: AttemptFailure<unknown>, retry: number): void;
  /** Moving from `from` (which failed) to `to`. */
  fellBack?(from: D, to: D): void;
  cooledDown?(target: D): void;
  /** Put after the ready deployments: tried only once they all failed. */
  deferred?(target: D, reason: 'cooling'): void;
}

export interface ChainSettings {
  /** Retries on the same deployment after a `retry` failure. */
  retries: number;
  backoffMs: number;
  maxRetryAfterMs: number;
  /** No attempt starts after this moment (`now()`'s clock); the first always does. */
  deadline: number;
}

export interface ChainOptions<D> extends ChainSettings {
  cooldown: CooldownBoard;
  /** The caller's reason to stop trying (the client left): checked before every attempt and wait. */
  cancelled?: () => boolean;
  observer?: ChainObserver<D>;
  now?: () => number;
  random?: () => number;
  sleep?: (ms: number) => Promise<unknown>;
}

export type ChainOutcome<D, T, E> =
  | { ok: true; value: T; target: D; attempts: number }
  | {
      ok: false;
      last: AttemptFailure<E> | null;
      attempts: number;
      /** How many distinct deployments were called (a deadline or a stop can end the chain before the last). */
      deploymentsTried: number;
      ended: 'exhausted' | 'stopped' | 'deadline' | 'cancelled';
    };

/**
 * Runs `attempt` over the deployments until one succeeds: in their order (weighted ranks shuffled,
 * src/routing/order.ts), those cooling down put last (tried only once every ready one failed: a
 * cooldown may be wrong, and a guess at a healthy deployment beats a certain refusal), retrying a deployment's
 * `retry` failures up to `retries` times with backoff, moving on after `retry` and `next`
 * failures, ending at a `stop`. Nothing here knows what is being attempted: chat and embeddings
 * hand in their own attempt function, which classifies its outcome.
 */
export async function runAttempts<D extends RoutedTarget, T, E>(
  deployments: readonly D[],
  attempt: (target: D) => Promise<AttemptOutcome<T, E>>,
  o: ChainOptions<D>,
): Promise<ChainOutcome<D, T, E>> {
  const now = o.now ?? (() => performance.now());
  const random = o.random ?? Math.random;
  const wait = o.sleep ?? sleep;
  const ordered = orderByWeight(deployments, random);
  const cooling = ordered.filter((d) => o.cooldown.isCooling(d.id));
  for (const d of cooling) o.observer?.deferred?.(d, 'cooling');
  const chain = [...ordered.filter((d) => !cooling.includes(d)), ...cooling];

  let attempts = 0;
  let deploymentsTried = 0;
  let last: AttemptFailure<E> | null = null;
  let previous: D | null = null;
  const failed = (ended: 'exhausted' | 'stopped' | 'deadline' | 'cancelled') => ({ ok: false as const, last, attempts, deploymentsTried, ended });
  for (const target of chain) {
    for (let retry = 0; ; retry++) {
      if (o.cancelled?.()) return failed('cancelled');
      if (attempts > 0 && now() >= o.deadline) return failed('deadline');
      if (previous && previous !== target && retry === 0) o.observer?.fellBack?.(previous, target);
      if (retry === 0) deploymentsTried++;
      previous = target;
      attempts++;
      o.observer?.attempt?.(target, retry);
      const outcome = await attempt(target);
      if (outcome.ok) return { ok: true, value: outcome.value, target, attempts };
      last = outcome;
      o.observer?.failed?.(target, outcome, retry);
      if (outcome.action !== 'stop' && o.cooldown.recordFailure(target.id)) o.observer?.cooledDown?.(target);
      if (outcome.action === 'stop') return failed('stopped');
      if (outcome.action === 'next' || retry >= o.retries) break;
      const delay = retryDelayMs(retry, outcome.retryAfterMs, { baseMs: o.backoffMs, maxRetryAfterMs: o.maxRetryAfterMs }, random);
      if (delay === null || now() + delay >= o.deadline) break;
      await wait(delay);
    }
  }
  return failed('exhausted');
}
