/**
 * Anthropic's error type for each status (https://docs.anthropic.com/en/api/errors), so the
 * Anthropic SDKs raise the error class a client already handles. 402 is Anthropic's own
 * `billing_error`: a balance too low for the reservation is a billing problem, not a bad request.
 */
const TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'invalid_request_error',
  413: 'request_too_large',
  415: 'invalid_request_error',
  429: 'rate_limit_error',
  500: 'api_error',
  502: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicErrorType(status: number): string {
  return TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

/**
 * `{"type":"error","error":{"type","message"}}` with the status kept; the gateway's own code and
 * extras (balance_usdc, param, an x402 offer, …) ride inside `error`, where Anthropic's clients
 * keep unknown fields.
 */
export function anthropicErrorBody(e: { status: number; code: string; message: string; extra: Record<string, unknown> }): Record<string, unknown> {
  return { type: 'error', error: { ...e.extra, type: anthropicErrorType(e.status), message: e.message, code: e.code } };
}
