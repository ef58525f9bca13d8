import { decide, type RateDecision, type RateLimiter, type RateWindow } from './limiter.ts';

/** In-process sliding-window log: exact, for a single instance. Timestamps are kept sorted. */
export function memoryLimiter(): RateLimiter {
  const logs = new Map<string, number[]>();
  let calls = 0;

  function prune(now: number): void {
    // Occasionally drop keys whose whole log has aged out, so idle wallets do not accumulate.
    for (const [key, log] of logs) if (!log.length || log[log.length - 1]! <= now - 86_400_000) logs.delete(key);
  }

  return {
    async hit(key: string, windows: RateWindow[], now = Date.now()): Promise<RateDecision> {
      if (++calls % 10_000 === 0) prune(now);
      const maxWindow = Math.max(0, ...windows.map((w) => w.windowMs));
      let log = logs.get(key) ?? [];
      const firstLive = firstAfter(log, now - maxWindow);
      if (firstLive > 0) log = log.slice(firstLive);
      const counts: number[] = [];
      const oldest: (number | null)[] = [];
      for (const w of windows) {
        const start = firstAfter(log, now - w.windowMs);
        counts.push(log.length - start);
        oldest.push(start < log.length ? log[start]! : null);
      }
      const decision = decide(now, windows, counts, oldest);
      if (decision.allowed) log.push(now);
      logs.set(key, log);
      return decision;
    },
    async close() {
      logs.clear();
    },
  };
}

/** Index of the first entry strictly greater than `t` (binary search over a sorted log). */
function firstAfter(log: number[], t: number): number {
  let lo = 0;
  let hi = log.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (log[mid]! > t) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
