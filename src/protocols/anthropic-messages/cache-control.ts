/**
 * Why a `cache_control` marker is refused, or null when it may go to Anthropic. Cache writes are
 * priced at the model's cache-write price, which is Anthropic's 5-minute rate (1.25× input); a
 * one-hour write costs twice the input price, more than any token is reserved or billed at, so a
 * `ttl` other than "5m" is refused wherever the marker comes from (a native Messages block, or a
 * chat-completions text part that keeps its marker on the way to Anthropic).
 */
export function cacheTtlProblem(block: unknown, path: string): string | null {
  const ttl = (block as { cache_control?: { ttl?: unknown } | null } | null)?.cache_control?.ttl;
  if (ttl === undefined || ttl === null || ttl === '5m') return null;
  return `${path}.cache_control.ttl ${JSON.stringify(String(ttl).slice(0, 20))} is refused: cache writes are priced at the 5-minute rate; send "5m" or leave ttl out`;
}
