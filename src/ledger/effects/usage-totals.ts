import type { Rows } from './statement.ts';
import type { UsageRow } from './usage-row.ts';

/** The totals add up the usage row's own values. */
export type TotalsAddition = Pick<UsageRow, 'apiKeyId' | 'promptTokens' | 'completionTokens' | 'reasoningTokens' | 'cachedTokens' | 'charged' | 'providerCost'>;

// A key's first finish inserts its totals row, every later one adds to it (in PostgreSQL under the
// row lock ON CONFLICT takes, so none is lost).
const ACCUMULATE = `ON CONFLICT (api_key_id) DO UPDATE SET
    request_count = usage_totals.request_count + excluded.request_count,
    prompt_tokens = usage_totals.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = usage_totals.completion_tokens + excluded.completion_tokens,
    reasoning_tokens = usage_totals.reasoning_tokens + excluded.reasoning_tokens,
    cached_tokens = usage_totals.cached_tokens + excluded.cached_tokens,
    charged_usdc = usage_totals.charged_usdc + excluded.charged_usdc,
    provider_cost_usdc = usage_totals.provider_cost_usdc + excluded.provider_cost_usdc`;

/**
 * Adds the usage row just written to its key's running totals (what GET /v1/usage reads). An
 * increment in the database, never a read-modify-write here, so concurrent finishes all count.
 * `requests`: how many usage rows it adds (a group commit's batch adds several in one statement).
 */
export const addToTotals = (rows: Rows, v: TotalsAddition, requests = '1'): string =>
  `INSERT INTO usage_totals
  (api_key_id, request_count, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens, charged_usdc, provider_cost_usdc)
  ${rows([v.apiKeyId, requests, v.promptTokens, v.completionTokens, v.reasoningTokens, v.cachedTokens, v.charged, v.providerCost])}
  ${ACCUMULATE}`;
