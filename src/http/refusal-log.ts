/**
 * What the access-log line says about a refused request: the stable code (VALIDATION_ERROR,
 * UNAUTHORIZED, RATE_LIMITED…) and, when the refusal names one, the request field at fault. Never
 * the message, which may quote what the client sent (a model name, a SIWE field), and never the
 * body or a header: an operator sees why a client fails without the log holding anything secret.
 * Kept per reply, set where a refusal is written (errors.ts, x402-payment.ts) and read by the
 * logger's `res` serializer when the request's one log line is written.
 */
export interface LoggedRefusal {
  code: string;
  param?: string;
}

const refusals = new WeakMap<object, LoggedRefusal>();

/** A field name as a refusal names it ("messages.0.content"): short, never a value. */
const FIELD_NAME = /^[A-Za-z0-9_.[\]-]{1,80}$/;

export function noteRefusal(reply: object, code: string, param?: unknown): void {
  refusals.set(reply, typeof param === 'string' && FIELD_NAME.test(param) ? { code, param } : { code });
}

/** The refusal noted on `reply`, as fields of its log line ({} when it was not refused). */
export function refusalOf(reply: object): LoggedRefusal | Record<string, never> {
  return refusals.get(reply) ?? {};
}
