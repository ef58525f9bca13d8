import { parseJsonLoosely } from '../json.ts';
import { ApiError } from '../refusal.ts';

/**
 * A provider's answers that the very same request will get again: its refusal of the request (400,
 * 404, 413) or of the operator's credentials or account (401, 402, 403). Retrying them only spends
 * provider calls.
 */
const FINAL_PROVIDER_STATUSES: ReadonlySet<number> = new Set([400, 401, 402, 403, 404, 413]);
/** A provider's "busy, come back later" (Anthropic's 529 overloaded among them). */
const BUSY_PROVIDER_STATUSES: ReadonlySet<number> = new Set([429, 503, 529]);

/** What the provider answered, when it answered with an HTTP status. */
export interface ProviderAnswer {
  status: number;
  headers?: Record<string, string | string[] | undefined>;
}

/**
 * A 502 that says what the provider did, with the provider's own error message when it sent one.
 * When the provider refused the request itself (FINAL_PROVIDER_STATUSES) it says
 * `x-should-retry: false`, or Claude Code and the SDKs retry a 5xx ten times; when it was busy
 * (BUSY_PROVIDER_STATUSES) its own Retry-After, if it sent a plain number of seconds, is passed on.
 */
export function upstreamFailure(what: string, upstreamBody?: string, answer?: ProviderAnswer): ApiError {
  const headers: Record<string, string> = {};
  if (answer && FINAL_PROVIDER_STATUSES.has(answer.status)) headers['x-should-retry'] = 'false';
  if (answer && BUSY_PROVIDER_STATUSES.has(answer.status)) {
    const after = answer.headers?.['retry-after'];
    const seconds = Array.isArray(after) ? after[0] : after;
    if (typeof seconds === 'string' && /^\d{1,5}$/.test(seconds.trim())) headers['retry-after'] = seconds.trim();
  }
  return new ApiError(502, 'UPSTREAM_ERROR', `${what}${upstreamBody ? providerMessage(upstreamBody) : ''}; nothing was charged`, {}, headers);
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

/**
 * The 502 for a timeout before the headers of an answer the provider sends whole (not streamed),
 * null for any other error. The answer's own length may be the cause, which the client can change,
 * so the message says how (`advice`). It says `x-should-retry: false`: the same request would most
 * likely time out again, and each try is a generation the provider bills and nobody pays for.
 */
export function wholeAnswerTimeoutFailure(err: unknown, advice: string): ApiError | null {
  if ((err as { code?: unknown })?.code !== 'UND_ERR_HEADERS_TIMEOUT') return null;
  const failure = upstreamFailure(`${describeTransportError(err)} (${advice})`);
  failure.headers['x-should-retry'] = 'false';
  return failure;
}

export function redactCredentials(text: string): string {
  return text.replace(/\b(sk|pk|rk|key)[-_][A-Za-z0-9_*-]{6,}/gi, '[redacted]').replace(/Bearer\s+\S+/gi, 'Bearer [redacted]');
}
