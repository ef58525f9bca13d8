import { ApiError } from '../http/errors.ts';

/**
 * A 502 that says what the provider did, with the provider's own error message when it sent one.
 * Anything that looks like a credential is cut out first: some providers echo part of the key.
 */
export function upstreamFailure(what: string, upstreamBody?: string): ApiError {
  let detail = '';
  if (upstreamBody) {
    try {
      const msg = JSON.parse(upstreamBody)?.error?.message;
      if (typeof msg === 'string') detail = `: ${redactCredentials(msg).slice(0, 300)}`;
    } catch {
      // Not JSON: say nothing more rather than echo an arbitrary body.
    }
  }
  return new ApiError(502, 'UPSTREAM_ERROR', `${what}${detail}; nothing was charged`);
}

export function redactCredentials(text: string): string {
  return text.replace(/\b(sk|pk|rk|key)[-_][A-Za-z0-9_*-]{6,}/gi, '[redacted]').replace(/Bearer\s+\S+/gi, 'Bearer [redacted]');
}
