import { parseJsonLoosely } from '../json.ts';
import { ApiError } from '../refusal.ts';

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

/** Transport failures where a connection existed and the provider (or a hop before it) dropped it. */
const CLOSED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNABORTED']);
/** Failures to get a connection at all. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN']);

/**
 * Says what went wrong talking to the provider, for transport errors (no HTTP answer). The three
 * cases need different fixes (the provider's health, the operator's baseUrl or network, a slow
 * model or the chat.*TimeoutSeconds settings), so they are named apart.
 */
export function describeTransportError(err: unknown): string {
  const e = err as { code?: string; name?: string };
  if (e?.code === 'UND_ERR_CONNECT_TIMEOUT') return 'the provider timed out while connecting';
  if (e?.code === 'UND_ERR_HEADERS_TIMEOUT') return 'the provider timed out before answering';
  if (e?.code === 'UND_ERR_BODY_TIMEOUT') return 'the provider timed out: it stopped sending mid-answer';
  if (e?.name === 'TimeoutError') return 'the provider timed out';
  if (e?.code && CLOSED.has(e.code)) return 'the provider closed the connection';
  if (e?.code && UNREACHABLE.has(e.code)) return 'the provider could not be reached';
  if (err instanceof SyntaxError) return 'the provider sent invalid JSON';
  return 'the provider request failed';
}

export function redactCredentials(text: string): string {
  return text.replace(/\b(sk|pk|rk|key)[-_][A-Za-z0-9_*-]{6,}/gi, '[redacted]').replace(/Bearer\s+\S+/gi, 'Bearer [redacted]');
}
