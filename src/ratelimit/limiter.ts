/** A sliding window: at most `limit` hits in any `windowMs` milliseconds. */
export interface RateWindow {
  limit: number;
  windowMs: number;
}

export interface RateDecision {
  allowed: boolean;
  /** The limit of the tightest window. */
  limit: number;
  /** Hits left in the tightest window after this one. */
  remaining: number;
  /** Epoch ms when the tightest window next frees a slot. */
  resetAt: number;
  /** When refused: ms until a retry can succeed. */
  retryAfterMs: number;
}

/**
 * Counts a hit against every window of `key`, atomically, and refuses it (recording nothing) when
 * any window is full. Refused hits do not count, so a client that keeps retrying is let in as soon as
 * the window allows. The one exception is a shared limiter's outage: a hit that timed out on a frozen
 * Redis may still be run by Redis once it resumes and take a slot though its request was decided
 * without it (redis.ts); it only ever over-counts, within the window.
 */
export interface RateLimiter {
  /**
   * `now` is the caller's clock: the in-process backend counts with it (tests move it); the shared
   * Redis backend ignores it and uses Redis's clock, the one time every instance agrees on.
   * Throws DependencyUnavailable when the backend cannot decide: nothing is let through unlimited.
   */
  hit(key: string, windows: RateWindow[], now?: number): Promise<RateDecision>;
  close(): Promise<void>;
}

export function windowsFrom(w: { perMinute?: number; perDay?: number }): RateWindow[] {
  const out: RateWindow[] = [];
  if (w.perMinute) out.push({ limit: w.perMinute, windowMs: 60_000 });
  if (w.perDay) out.push({ limit: w.perDay, windowMs: 86_400_000 });
  return out;
}

/** Combines the per-window counts into one decision (shared by both backends). */
export function decide(now: number, windows: RateWindow[], counts: number[], oldest: (number | null)[]): RateDecision {
  let allowed = true;
  let retryAfterMs = 0;
  let tightest = { limit: Infinity, remaining: Infinity, resetAt: now };
  windows.forEach((w, i) => {
    const count = counts[i]!;
    const resetAt = oldest[i] === null ? now + w.windowMs : oldest[i]! + w.windowMs;
    if (count >= w.limit) {
      allowed = false;
      retryAfterMs = Math.max(retryAfterMs, resetAt - now);
    }
    const remaining = Math.max(0, w.limit - count - 1);
    if (remaining < tightest.remaining) tightest = { limit: w.limit, remaining, resetAt };
  });
  if (!windows.length) return { allowed: true, limit: 0, remaining: 0, resetAt: now, retryAfterMs: 0 };
  return { allowed, limit: tightest.limit, remaining: allowed ? tightest.remaining : 0, resetAt: tightest.resetAt, retryAfterMs };
}
