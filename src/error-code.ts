/**
 * A short, secret-free name for an error, for logs: its code (ECONNREFUSED, UND_ERR_SOCKET, …) or
 * its class name. Never its message, which may embed a URL with credentials.
 */
export function errorCode(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown } | undefined;
  if (typeof e?.code === 'string') return e.code;
  return typeof e?.name === 'string' ? e.name : 'unknown';
}
