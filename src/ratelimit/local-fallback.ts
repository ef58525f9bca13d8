import { taggedDependency } from '../outage.ts';
import type { RateDecision, RateLimiter, RateWindow } from './limiter.ts';
import { memoryLimiter } from './memory.ts';
import type { RedisLimiter } from './redis.ts';

/**
 * The shared (Redis) limiter with a per-instance stand-in for when Redis does not answer.
 *
 * Rate limits only pace requests: money never depends on them (the ledger enforces balances and
 * key limits in the database), so a Redis outage must not refuse every request. While Redis is
 * down each instance counts in memory against its share of every window: the limit divided by
 * `rateLimits.instances` (rounded down, at least 1), so the instances together allow no more
 * than the configured limit. The local counts start empty: hits Redis counted before the outage
 * are not known here, so in the first window of an outage each instance may give its share again,
 * up to the whole limit once more across all instances; from the next window on, no more than the limit.
 *
 * Requests never wait on a Redis known to be down: once one request finds it down, every request
 * is decided locally, and a probe (every PROBE_INTERVAL_MS, and /health's) asks Redis until it
 * answers; then the shared limiter decides again. Each transition is reported once, not per request.
 */
export interface FallbackLimiter extends RateLimiter {
  /** True while decisions are made locally because Redis does not answer. */
  degraded(): boolean;
  /** /health's probe of Redis: throws while Redis cannot run the limiter; its answer moves the state. */
  probe(): Promise<void>;
}

export interface FallbackEvents {
  /** Called on each transition (Redis lost: `degraded` true; Redis back: false), never per request. */
  onChange(degraded: boolean, err?: unknown): void;
  /** Called for every decision made locally (for the metric). */
  onLocalDecision(): void;
}

export const PROBE_INTERVAL_MS = 1_000;

export function withLocalFallback(shared: RedisLimiter, instances: number, events: FallbackEvents): FallbackLimiter {
  const local = memoryLimiter();
  let down = false;
  let probeTimer: NodeJS.Timeout | null = null;

  const enter = (err: unknown) => {
    if (down) return;
    down = true;
    events.onChange(true, err);
    // Unref'd: an instance shutting down during an outage must not be held open by the probe.
    probeTimer = setInterval(() => void probeShared().catch(() => undefined), PROBE_INTERVAL_MS);
    probeTimer.unref();
  };
  const leave = () => {
    if (!down) return;
    down = false;
    if (probeTimer) clearInterval(probeTimer);
    probeTimer = null;
    events.onChange(false);
  };

  // One probe at a time: against a frozen Redis each waits out the command timeout, and timer
  // ticks and /health polls must not pile up connections' worth of waiting probes.
  let probeInFlight: Promise<void> | null = null;
  function probeShared(): Promise<void> {
    return (probeInFlight ??= probeOnce().finally(() => (probeInFlight = null)));
  }
  async function probeOnce(): Promise<void> {
    try {
      await shared.probe();
    } catch (err) {
      if (taggedDependency(err) === 'redis') enter(err);
      throw err;
    }
    leave();
  }

  async function hitLocally(key: string, windows: RateWindow[], now: number | undefined): Promise<RateDecision> {
    events.onLocalDecision();
    return local.hit(key, shareOf(windows, instances), now);
  }

  return {
    async hit(key, windows, now) {
      if (down) return hitLocally(key, windows, now);
      try {
        return await shared.hit(key, windows, now);
      } catch (err) {
        // Only an outage falls back: a bug in the limiter's script stays the 500 it is (redis.ts).
        if (taggedDependency(err) !== 'redis') throw err;
        enter(err);
        return hitLocally(key, windows, now);
      }
    },
    degraded: () => down,
    probe: probeShared,
    async close() {
      if (probeTimer) clearInterval(probeTimer);
      await Promise.all([shared.close(), local.close()]);
    },
  };
}

/** An instance's share of each window: the limit over `instances`, rounded down, never below 1. */
export function shareOf(windows: RateWindow[], instances: number): RateWindow[] {
  return windows.map((w) => ({ ...w, limit: Math.max(1, Math.floor(w.limit / instances)) }));
}
