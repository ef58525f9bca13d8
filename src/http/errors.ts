import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { OUTAGE_RETRY_AFTER_SECONDS, taggedDependency } from '../outage.ts';
import { isTransportError } from '../chain/rpc-errors.ts';
import { isDatabaseOutage } from '../storage/database-outage.ts';
import { ApiError } from '../refusal.ts';
import { errorBody, formatFor, type ErrorFormat } from './error-format.ts';
import { noteRefusal } from './refusal-log.ts';

// The refusal itself is domain data, imported from src/refusal.ts by everyone; this file only renders it.

const CODE_BY_STATUS: Record<number, string> = {
  400: 'VALIDATION_ERROR',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  402: 'INSUFFICIENT_BALANCE',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  414: 'URI_TOO_LONG',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
  502: 'UPSTREAM_ERROR',
  503: 'SERVICE_UNAVAILABLE',
};

/**
 * The error handler of an app whose config says `errors.format`. Turns anything thrown by a route
 * or by Fastify itself into an error body (see error-format.ts for the two shapes). A dependency
 * that did not answer is a 503 with Retry-After (the request was fine; retrying can work).
 * Unexpected errors become a 500 whose body names only the request id; the details go to the log.
 */
export function errorHandler(format: ErrorFormat) {
  return function handleError(err: FastifyError | ApiError, request: FastifyRequest, reply: FastifyReply): void {
    sendError(request, reply, format, toApiError(err, request));
  };
}

/** Writes `err` in the shape the request's route calls for: the one place error bodies are built. */
export function sendError(request: FastifyRequest, reply: FastifyReply, format: ErrorFormat, err: ApiError): void {
  const codec = request.routeOptions?.config?.inboundCodec;
  // A refusal of the translated body names the field the client sent (Responses' max_output_tokens, not max_tokens).
  if (codec?.clientParam && typeof err.extra.param === 'string') {
    err = new ApiError(err.status, err.code, err.message, { ...err.extra, param: codec.clientParam(err.extra.param) }, err.headers);
  }
  noteRefusal(reply, err.code, err.extra.param);
  // A chat route of another protocol (Anthropic Messages, …) writes errors in that protocol's shape.
  const own = codec?.errorBody;
  void reply
    .code(err.status)
    .headers(retryHeaders(err))
    .send(own ? own(err) : errorBody(formatFor(request, format), err));
}

/** Seconds a client is told to wait before retrying a 429 or 503 that named no wait of its own. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;

/**
 * The error's headers plus what tells a client whether to retry. 400, 401, 402 and 403 will answer
 * the same until the request, the key or the balance changes: `x-should-retry: false` stops the
 * Stainless-generated SDKs (openai, anthropic, and Claude Code, which otherwise retries a 401 ten
 * times over about three minutes) from retrying them. The exception is a 402 that set its own
 * `Retry-After`: the wallet's own requests in flight hold the funds, and the same request succeeds
 * once they settle (src/http/auth/key-checks.ts). A 429 or 503 is worth retrying, after `Retry-After`
 * (kept when the refusal set its own), unless the refusal said `x-should-retry: false` itself: a 503
 * for the gateway's own configuration (src/http/inference/provider-ready.ts) answers the same until the
 * operator changes it, so it invites no retry. A 502 carries what its mapping set (src/metered/upstream-error.ts:
 * `x-should-retry: false` for a provider's own refusal, the provider's Retry-After when it was busy).
 */
export function retryHeaders(err: ApiError): Record<string, string> {
  const headers: Record<string, string> = { ...err.headers };
  const waits = Object.keys(headers).some((h) => h.toLowerCase() === 'retry-after');
  const final = headers['x-should-retry'] === 'false';
  if (err.status === 400 || err.status === 401 || err.status === 403 || (err.status === 402 && !waits)) headers['x-should-retry'] = 'false';
  if ((err.status === 429 || err.status === 503) && !waits && !final) {
    headers['retry-after'] = String(DEFAULT_RETRY_AFTER_SECONDS);
  }
  return headers;
}

function toApiError(err: FastifyError | ApiError, request: FastifyRequest): ApiError {
  if (err instanceof ApiError) return err;
  const down = unavailableDependency(err);
  if (down) {
    request.log.warn({ err, dependency: down }, 'dependency unavailable');
    return new ApiError(
      503,
      'SERVICE_UNAVAILABLE',
      `${describeDependency(down)} is not answering; retry in ${OUTAGE_RETRY_AFTER_SECONDS} seconds`,
      { dependency: down },
      { 'retry-after': String(OUTAGE_RETRY_AFTER_SECONDS) },
    );
  }
  const known = describeFrameworkError(err);
  if (known) return new ApiError(known.status, CODE_BY_STATUS[known.status] ?? 'VALIDATION_ERROR', known.message);
  request.log.error({ err }, 'unhandled error');
  return new ApiError(500, 'INTERNAL_ERROR', `internal error; quote request id ${request.id} when reporting it`);
}

function describeFrameworkError(err: FastifyError): { status: number; message: string } | null {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, message: 'request body is too large' };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, message: 'Content-Type must be application/json' };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, message: 'request body is empty; send a JSON object' };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 400, message: 'Content-Length does not match the body' };
  }
  if (err.validation) return { status: 400, message: err.message };
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return { status: 400, message: 'request body is not valid JSON' };
  }
  const status = err.statusCode;
  if (status && status >= 400 && status < 500) return { status, message: err.message };
  return null;
}

/**
 * Which dependency an error says is down, or null when it is some other failure. The tag set where
 * the error arose wins (Redis's client tags its own); then an RPC transport error; only then the
 * database's codes, which a socket error of any other client would also match.
 */
export function unavailableDependency(err: unknown): string | null {
  const tagged = taggedDependency(err);
  if (tagged) return tagged;
  if (isTransportError(err)) return 'rpc';
  if (isDatabaseOutage(err)) return 'database';
  return null;
}

/** The dependency as a 503's message names it: what it is for, not only its product name. */
function describeDependency(name: string): string {
  if (name === 'redis') return 'the rate-limit store (Redis)';
  if (name === 'rpc' || name.startsWith('rpc:')) return 'the chain RPC';
  return `the ${name}`;
}

/**
 * Fastify's `frameworkErrors`: what the router refuses before any hook runs (a path that is not
 * valid percent-encoding, a path parameter over its length limit). Fastify's own answer is
 * `{error: "Bad Request"}` and quotes the whole URL, query string included, which can carry a
 * SIWE signature; this one has a stable code and names no part of the URL.
 */
export function frameworkErrorHandler(format: ErrorFormat) {
  const handleError = errorHandler(format);
  return function handleFrameworkError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
    if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
      sendError(request, reply, format, new ApiError(414, 'URI_TOO_LONG', 'a path parameter is too long; check the URL'));
      return;
    }
    if (err.code === 'FST_ERR_BAD_URL') {
      sendError(request, reply, format, new ApiError(400, 'VALIDATION_ERROR', 'the URL is not valid percent-encoding; encode it with encodeURIComponent'));
      return;
    }
    handleError(err, request, reply);
  };
}
