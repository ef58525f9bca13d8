import { errorCode } from '../error-code.ts';
import { parseRetryAfter } from './backoff.ts';
import { asFinalRefusal, refusedForTheRequest } from './request-refusal.ts';

/**
 * What the chain does after a failed attempt:
 * - `retry`: the deployment is unwell right now (refused or dropped the connection, timed out
 *   before the first byte of a streamed answer, 408, 409, 429, 5xx, 529): retry it (chat.retries),
 *   then move on;
 * - `next`: this deployment cannot serve, another may (its key is missing or was refused, its
 *   account is out of credit): move on at once;
 * - `stop`: the request itself was refused (400, 404, 413, 422, …, and a 429, 402 or 403 whose body
 *   says so: request-refusal.ts): every deployment would refuse it again, so the chain ends and the
 *   client gets the answer.
 * A timeout before the headers of an answer sent whole moves on at once and never counts toward a
 * cooldown (see `AnswerDelivery` and `coolsDeployment`).
 */
export type FailureAction = 'retry' | 'next' | 'stop';

const RETRY_STATUSES: ReadonlySet<number> = new Set([408, 409, 429, 500, 502, 503, 504, 529]);
/** The operator's credentials or account at this provider, not the request: another deployment may have good ones. */
const NEXT_STATUSES: ReadonlySet<number> = new Set([401, 402, 403]);

export function actionForStatus(status: number): FailureAction {
  if (RETRY_STATUSES.has(status)) return 'retry';
  if (NEXT_STATUSES.has(status)) return 'next';
  // Any other 5xx is the provider's trouble too (a proxy's 520-524, a 507).
  return status >= 500 ? 'retry' : 'stop';
}

/** Transport errors where no byte of an answer came: the deployment was unreachable, dropped us, or was too slow to start. */
const RETRY_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
]);

/**
 * How the provider sends its answer: a stream's headers come as soon as it starts generating; a
 * whole (JSON) answer's only once it is fully generated, so its time to headers grows with the
 * output the request asked for.
 */
export type AnswerDelivery = 'streamed' | 'whole';

/**
 * A transport error before the answer's headers: retry or move on, except our own abort (the
 * client left), which stops. A first-byte timeout of an answer sent whole moves on at once, without
 * a retry on the same deployment: the deployment may be stuck (the provider's bad hour the
 * fallbacks exist for) or healthy and generating a long answer; the next deployment is tried, as for
 * any deployment that did not answer in time, but the same one is not asked again.
 */
export function actionForTransportError(err: unknown, delivery: AnswerDelivery): FailureAction {
  const code = (err as { code?: unknown })?.code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' && delivery === 'whole') return 'next';
  return typeof code === 'string' && RETRY_CODES.has(code) ? 'retry' : 'stop';
}

/**
 * Whether a failure says something about the deployment's health, so that it may count toward a
 * cooldown. A first-byte timeout of an answer sent whole does not: the request's own size can cause
 * it (a long answer is sent only once fully generated), and counting it would let one caller's long
 * requests cool a healthy deployment for everyone (docs/DECISIONS.md, "Cooldowns").
 */
export function coolsDeployment(err: unknown, delivery: AnswerDelivery): boolean {
  return !((err as { code?: unknown })?.code === 'UND_ERR_HEADERS_TIMEOUT' && delivery === 'whole');
}

/** A failure before any answer (a transport error), classified for the chain: what to do, whether it cools, its code. */
export function transportFailure<E>(err: unknown, delivery: AnswerDelivery, error: E) {
  return { ok: false as const, action: actionForTransportError(err, delivery), cools: coolsDeployment(err, delivery), code: errorCode(err), error };
}

/**
 * A provider's non-2xx answer, classified for the chain, with its Retry-After. Its `body` is read
 * for a refusal of the request itself under a deployment's status (request-refusal.ts): that ends
 * the chain and counts toward no cooldown, so one caller's requests neither fan out over every
 * deployment nor cool a healthy one for everyone.
 */
export function statusFailure<E>(status: number, headers: Record<string, string | string[] | undefined> | undefined, error: E, body?: string) {
  if (refusedForTheRequest(status, body)) return { ok: false as const, action: 'stop' as const, cools: false, status, error: asFinalRefusal(error) };
  return { ok: false as const, action: actionForStatus(status), status, retryAfterMs: parseRetryAfter(headers?.['retry-after']), error };
}
