/** The API version every request names; Anthropic keeps the wire format stable within it. */
export const DEFAULT_ANTHROPIC_VERSION = '2023-06-01';

export interface AnthropicHeaderOptions {
  apiKey?: string;
  /** `anthropic-version`; defaults to DEFAULT_ANTHROPIC_VERSION. */
  version?: string;
  /** Beta features the operator turned on (for example "prompt-caching-2024-07-31"), sent as one comma-separated `anthropic-beta`. */
  beta?: readonly string[];
}

/** Headers for a POST to Anthropic's /v1/messages. The key goes in `x-api-key`, never in `authorization`. */
export function anthropicHeaders(opts: AnthropicHeaderOptions): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'anthropic-version': opts.version ?? DEFAULT_ANTHROPIC_VERSION,
  };
  if (opts.apiKey) headers['x-api-key'] = opts.apiKey;
  const beta = (opts.beta ?? []).map((b) => b.trim()).filter(Boolean);
  if (beta.length) headers['anthropic-beta'] = beta.join(',');
  return headers;
}
