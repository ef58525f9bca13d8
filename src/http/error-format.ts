import type { FastifyRequest } from 'fastify';

/**
 * Two ways to write an error body.
 * - `spec`: `{error: CODE, message, ...extras}`, the specification's contract (the default).
 * - `openai`: `{error: {message, type, code: CODE, param, ...extras}, ...extras}`, the nesting OpenAI
 *   clients read. openai-node keeps only `body.error` on its error object and the Python SDK keeps it
 *   as `e.body`, so the extras (balance_usdc, required_usdc, candidates, …) are repeated inside
 *   `error`, or a client could not reach them; they stay at the top level too, as the issue asks.
 * Only routes that declare themselves OpenAI-compatible use `openai`, and only when
 * `errors.format: openai` is configured.
 */
export type ErrorFormat = 'spec' | 'openai';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route is one an OpenAI client calls: its errors follow `errors.format`. */
    openaiCompatible?: boolean;
  }
}

/** Route option for endpoints OpenAI clients call (chat completions, models, and later ones). */
export const OPENAI_COMPATIBLE = { config: { openaiCompatible: true } } as const;

/**
 * OpenAI's `type` for each of our codes. OpenAI's own vocabulary: a client branching on `type`
 * (or on the SDK's error class, which follows the status) sees what it would see from OpenAI.
 * Codes not listed fall back on their status (see openaiType), so a new code gets a sensible type.
 */
export const OPENAI_TYPE_BY_CODE: Readonly<Record<string, string>> = {
  VALIDATION_ERROR: 'invalid_request_error',
  UNAUTHORIZED: 'authentication_error',
  FORBIDDEN: 'permission_error',
  // OpenAI's name for "no credit left": the status stays 402, the type says what to fix.
  INSUFFICIENT_BALANCE: 'insufficient_quota',
  NOT_FOUND: 'not_found_error',
  METHOD_NOT_ALLOWED: 'invalid_request_error',
  NOT_ACCEPTABLE: 'invalid_request_error',
  CONFLICT: 'invalid_request_error',
  PAYLOAD_TOO_LARGE: 'invalid_request_error',
  URI_TOO_LONG: 'invalid_request_error',
  UNSUPPORTED_MEDIA_TYPE: 'invalid_request_error',
  RATE_LIMITED: 'rate_limit_error',
  // The provider failed, not the request: OpenAI's generic API failure.
  UPSTREAM_ERROR: 'api_error',
  SERVICE_UNAVAILABLE: 'server_error',
  INTERNAL_ERROR: 'server_error',
};

const OPENAI_TYPE_BY_STATUS: Readonly<Record<number, string>> = {
  401: 'authentication_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
  502: 'api_error',
};

export function openaiType(code: string, status: number): string {
  return OPENAI_TYPE_BY_CODE[code] ?? OPENAI_TYPE_BY_STATUS[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
}

export interface ErrorParts {
  status: number;
  code: string;
  message: string;
  /** Extra body fields. `param` names the offending request field; OpenAI's shape nests it. */
  extra: Record<string, unknown>;
}

export function errorBody(format: ErrorFormat, e: ErrorParts): Record<string, unknown> {
  if (format === 'spec') return { error: e.code, message: e.message, ...e.extra };
  const { param, ...extras } = e.extra;
  return {
    error: { message: e.message, type: openaiType(e.code, e.status), code: e.code, param: typeof param === 'string' ? param : null, ...extras },
    ...extras,
  };
}

/**
 * Requests the not-found handler matched to existing routes (405: right path, wrong method), with
 * whether those routes are OpenAI-compatible; Fastify runs no route for them, so no route option
 * says it.
 */
const routeFamilyOf = new WeakMap<FastifyRequest, boolean>();

export function markRouteFamily(request: FastifyRequest, openaiCompatible: boolean): void {
  routeFamilyOf.set(request, openaiCompatible);
}

/**
 * The shape of one request's error. A matched route decides by its own option. A request that
 * matched no route at all (404, a malformed URL) has no route to ask: it gets the configured
 * format, because the clients that call endpoints Tollgate does not serve (/v1/embeddings,
 * /v1/responses) are OpenAI clients, while spec clients call the documented routes.
 */
export function formatFor(request: FastifyRequest, configured: ErrorFormat): ErrorFormat {
  if (configured === 'spec') return 'spec';
  const family = routeFamilyOf.get(request);
  if (family !== undefined) return family ? 'openai' : 'spec';
  if (request.routeOptions?.config?.openaiCompatible) return 'openai';
  return request.is404 || request.routeOptions?.url === undefined ? 'openai' : 'spec';
}
