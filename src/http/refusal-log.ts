/**
 * What the access-log line says about a refused request: the stable code (VALIDATION_ERROR,
 * UNAUTHORIZED, RATE_LIMITED…) and, when the refusal names one, the request field at fault. Never
 * the message, which may quote what the client sent (a model name, a SIWE field), and never the
 * body or a header: an operator sees why a client fails without the log holding anything secret.
 * Kept per reply, set where a refusal is written (errors.ts, x402/payment-wire.ts) and read by the
 * logger's `res` serializer when the request's one log line is written.
 */
export interface LoggedRefusal {
  code: string;
  param?: string;
}

const refusals = new WeakMap<object, LoggedRefusal>();

/**
 * A field path as this gateway's refusals name one ("messages[0].content", "thinking.type",
 * "anthropic-beta"): segments that are indexes or lower-case field names of at most 40 characters.
 * An unknown field's name is the client's own text, so it may be anything, an API key included.
 */
const FIELD_SEGMENT = /^(?:[0-9]{1,6}|[a-z][a-z0-9_-]{0,39})$/;
/** Prefixes of this gateway's secrets (API keys, dashboard sessions) and of hex keys and signatures. */
const SECRET_PREFIX = /^(?:sk-|ses-|0x)/i;
export const UNKNOWN_FIELD = '(unknown field)';

/** `param` as the log line may hold it: a field path of known shape, else the placeholder. */
function loggedParam(param: string): string {
  const segments = param.split(/[.[\]]+/).filter((s) => s !== '');
  const known = param.length <= 80 && segments.length > 0 && segments.every((s) => FIELD_SEGMENT.test(s) && !SECRET_PREFIX.test(s));
  return known ? param : UNKNOWN_FIELD;
}

export function noteRefusal(reply: object, code: string, param?: unknown): void {
  refusals.set(reply, typeof param === 'string' && param !== '' ? { code, param: loggedParam(param) } : { code });
}

/** The refusal noted on `reply`, as fields of its log line ({} when it was not refused). */
export function refusalOf(reply: object): LoggedRefusal | Record<string, never> {
  return refusals.get(reply) ?? {};
}
