/** viem's errors for an RPC that is down, refused, or too slow (possibly wrapped as a cause). */
export function isTransportError(err: unknown): boolean {
  for (let e = err as { name?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (e.name === 'HttpRequestError' || e.name === 'TimeoutError' || e.name === 'WebSocketRequestError') return true;
  }
  return false;
}
