import { decide, type RateDecision, type RateLimiter, type RateWindow } from './limiter.ts';

/**
 * A key's hits, oldest first. Entries before `head` have left every window; they are cut off in
 * one copy only once they are half the array, so aging out costs amortised O(1) per hit instead of
 * copying the whole log (a day's hits, with a per-day window) on every request.
 */
interface HitLog {
  times: number[];
  head: number;
}

/** In-process sliding-window log: exact, for a single instance. Timestamps are kept sorted. */
export function memoryLimiter(): RateLimiter {
  const logs = new Map<string, HitLog>();
  let calls = 0;

  function prune(now: number): void {
    // Occasionally drop keys whose whole log has aged out, so idle wallets do not accumulate.
    for (const [key, log] of logs) if (log.head === log.times.length || log.times[log.times.length - 1]! <= now - 86_400_000) logs.delete(key);
  }

  return {
    async hit(key: string, windows: RateWindow[], now = Date.now()): Promise<RateDecision> {
      if (++calls % 10_000 === 0) prune(now);
      const maxWindow = Math.max(0, ...windows.map((w) => w.windowMs));
      let log = logs.get(key);
      if (!log) logs.set(key, (log = { times: [], head: 0 }));
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
