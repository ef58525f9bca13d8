/**
 * How long to wait before retrying the same deployment: the provider's Retry-After when it sent
 * one (its own estimate beats ours), else full jitter over an exponential step (`baseMs` × 2^retry),
 * so retries of many requests failing at once spread out instead of arriving together. Null when
 * the provider asks for longer than `maxRetryAfterMs`: then the next deployment is tried instead.
 */
export function retryDelayMs(
  retry: number,
  retryAfterMs: number | undefined,
  o: { baseMs: number; maxRetryAfterMs: number },
  random: () => number,
): number | null {
  if (retryAfterMs !== undefined) return retryAfterMs > o.maxRetryAfterMs ? null : retryAfterMs;
  return Math.round(random() * o.baseMs * 2 ** retry);
}

/**
 * A Retry-After header in milliseconds: delay-seconds, or an HTTP date (RFC 9110 §10.2.3); undefined
 * when absent or unreadable.
 */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const text = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!text) return undefined;
  if (/^\d{1,7}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
