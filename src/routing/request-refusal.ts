import { parseJsonLoosely } from '../json.ts';
import { ApiError } from '../refusal.ts';

/**
 * A provider's refusal whose status says "this deployment" (429 busy, 402 out of credit, 403
 * forbidden) but whose body says the request itself is the cause: the same request would be
 * refused again here, and a healthy deployment must not go cold for everyone because one caller
 * sends such requests. Each is named by what the provider documents or sends:
 * - 429 "Request too large for <model> … on tokens per min (TPM)" (OpenAI, code
 *   `rate_limit_exceeded`): this one request is over the organization's whole per-minute budget.
 *   Its "Rate limit reached for …" is a real rate limit and keeps its class.
 * - 402 "This request requires more credits, or fewer max_tokens … can only afford N" (OpenRouter)
 *   with N above 0: a smaller max_tokens would be served. With N = 0 the account is empty, which is
 *   the deployment's trouble and keeps its class.
 * - 403 with `error.metadata.reasons` or `flagged_input` (OpenRouter's moderation): the input was flagged.
 * Anthropic's 413 `request_too_large` and every other 4xx about the request already end the chain.
 */
export function refusedForTheRequest(status: number, body: string | undefined): boolean {
  if (!body || (status !== 429 && status !== 402 && status !== 403)) return false;
  const error = parseJsonLoosely(body)?.error;
  const message = typeof error?.message === 'string' ? (error.message as string) : '';
  if (status === 429) return /^Request too large for\b/.test(message);
  if (status === 402) {
    const afford = /requires more credits, or fewer max_tokens\b.*?can only afford (\d+)/s.exec(message);
    return afford !== null && Number(afford[1]) > 0;
  }
  const metadata = error?.metadata;
  return typeof metadata === 'object' && metadata !== null && (Array.isArray(metadata.reasons) || typeof metadata.flagged_input === 'string');
}

/**
 * The client's error for such a refusal: the provider's own message as for any refusal of the
 * request, saying `x-should-retry: false` and no Retry-After (the SDKs would send the same
 * request again, and it would be refused again).
 */
export function asFinalRefusal<E>(error: E): E {
  if (error instanceof ApiError) {
    error.headers['x-should-retry'] = 'false';
    delete error.headers['retry-after'];
  }
  return error;
}
