import { decide, type RateDecision, type RateLimiter, type RateWindow } from './limiter.ts';

/**
 * A key's hits, oldest first. Entries before `head` have left every window; they are cut off in
 * one copy only once they are half the array, so aging out costs amortised O(1) per hit instead of
 * copying the whole log (a day's hits, with a per-day window) on every request.
 */
interface HitLog {
  times: number[];
  head: number;
  /** The key's longest window at its last hit: once its last hit is older, no window counts it. */
  maxWindowMs: number;
}

/**
 * The most keys kept. Keys are named before authentication (`ip:<client /64>`), so a client with
 * a /48 can name a new key per request; past this many the least recently hit key is forgotten and,
 * if hit again, starts a fresh count. Only a flood of this many distinct keys within one window
 * evicts a key still counting, and each of those requests is itself counted.
 */
export const MAX_KEYS = 200_000;

/** In-process sliding-window log: exact, for a single instance. Timestamps are kept sorted. */
export function memoryLimiter(maxKeys = MAX_KEYS): RateLimiter {
  // Map order is recency order: a hit moves its key to the end, eviction takes the first.
  const logs = new Map<string, HitLog>();
  let calls = 0;

  function prune(now: number): void {
    // Occasionally drop keys whose last hit has left their longest window, so idle clients do not accumulate.
    for (const [key, log] of logs) if (log.head === log.times.length || log.times[log.times.length - 1]! <= now - log.maxWindowMs) logs.delete(key);
  }

  return {
    async hit(key: string, windows: RateWindow[], now = Date.now()): Promise<RateDecision> {
      if (++calls % 10_000 === 0) prune(now);
      const maxWindow = Math.max(0, ...windows.map((w) => w.windowMs));
      let log = logs.get(key);
      if (log) logs.delete(key);
      else {
        log = { times: [], head: 0, maxWindowMs: maxWindow };
        if (logs.size >= maxKeys) logs.delete(logs.keys().next().value!);
      }
      logs.set(key, log);
      log.maxWindowMs = maxWindow;
      const { times } = log;
      log.head = firstAfter(times, now - maxWindow, log.head);
      if (log.head > 1024 && log.head * 2 > times.length) {
        log.times = times.slice(log.head);
        log.head = 0;
      }
      const counts: number[] = [];
      const oldest: (number | null)[] = [];
      for (const w of windows) {
        const start = firstAfter(log.times, now - w.windowMs, log.head);
        counts.push(log.times.length - start);
        oldest.push(start < log.times.length ? log.times[start]! : null);
      }
      const decision = decide(now, windows, counts, oldest);
      if (decision.allowed) log.times.push(now);
      return decision;
    },
    async close() {
      logs.clear();
    },
  };
}

/** Index of the first entry at or after `from` strictly greater than `t` (binary search over a sorted log). */
function firstAfter(log: number[], t: number, from: number): number {
  let lo = from;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (log[mid]! > t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
