import { parseJsonLoosely } from '../json.ts';
import { ApiError } from '../http/errors.ts';

/**
 * A 502 that says what the provider did, with the provider's own error message when it sent one.
 */
export function upstreamFailure(what: string, upstreamBody?: string): ApiError {
  return new ApiError(502, 'UPSTREAM_ERROR', `${what}${upstreamBody ? providerMessage(upstreamBody) : ''}; nothing was charged`);
}

/**
 * `: <message>` from an OpenAI-style error body, or nothing when there is none (an arbitrary body
 * is never echoed). Anything that looks like a credential is cut out: some providers echo part of
 * the key.
 */
export function providerMessage(body: string): string {
  const msg: unknown = parseJsonLoosely(body)?.error?.message;
  return typeof msg === 'string' ? `: ${redactCredentials(msg).slice(0, 300)}` : '';
}

/** Says what went wrong talking to the provider, for transport errors (no HTTP answer). */
export function describeTransportError(err: unknown): string {
  const e = err as { code?: string; name?: string };
  if (e?.name === 'TimeoutError' || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT' || e?.code === 'UND_ERR_CONNECT_TIMEOUT') {
    return 'the provider timed out';
  }
  if (e?.code === 'ECONNREFUSED' || e?.code === 'ENOTFOUND' || e?.code === 'ECONNRESET' || e?.code === 'UND_ERR_SOCKET') return 'the provider could not be reached';
  if (err instanceof SyntaxError) return 'the provider sent invalid JSON';
  return 'the provider request failed';
}

export function redactCredentials(text: string): string {
  return text.replace(/\b(sk|pk|rk|key)[-_][A-Za-z0-9_*-]{6,}/gi, '[redacted]').replace(/Bearer\s+\S+/gi, 'Bearer [redacted]');
}
