import { ApiError } from '../refusal.ts';

/** How much body count_tokens takes on at once, per key and on the instance, in bytes. */
export interface CountingLimits {
  perKeyBytes: number;
  instanceBytes: number;
}

/**
 * count_tokens costs CPU time in proportion to its body (up to seconds for a maximal body of random
 * CJK text) and nothing in money, so what it may take on at once is bounded apart from the chat
 * rate limits: the bodies being counted for one key, and on the whole instance, may not pass these
 * sizes. Past them the request is a 429 with Retry-After, before anything is counted. Counting
 * itself never holds the event loop (the CPU lane); this bounds how long a count can wait
 * behind others and the memory held meanwhile.
 */
export class CountingBudget {
  private readonly byKey = new Map<string, number>();
  private total = 0;

  constructor(private readonly limits: CountingLimits) {}

  /** Takes `bytes` for `key`, or throws the 429; the function returned gives them back. */
  take(key: string, bytes: number): () => void {
    const mine = this.byKey.get(key) ?? 0;
    if (mine > 0 && mine + bytes > this.limits.perKeyBytes) throw busy(`this key already has ${mine} bytes being counted (at most ${this.limits.perKeyBytes} at once)`);
    if (this.total > 0 && this.total + bytes > this.limits.instanceBytes) throw busy(`the gateway is counting ${this.total} bytes of requests (at most ${this.limits.instanceBytes} at once)`);
    this.byKey.set(key, mine + bytes);
    this.total += bytes;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.total -= bytes;
      const left = (this.byKey.get(key) ?? bytes) - bytes;
      if (left > 0) this.byKey.set(key, left);
      else this.byKey.delete(key);
    };
  }
}

const busy = (why: string) =>
  new ApiError(429, 'RATE_LIMITED', `count_tokens is busy: ${why}; retry in a moment, or count smaller requests`, { retry_after_ms: 1000 }, { 'retry-after': '1' });
