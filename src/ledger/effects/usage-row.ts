import type { UsageRecord } from '../reservations.ts';
import type { Operands, Rows } from './statement.ts';

export type UsageRow = Operands<
  | 'requestId'
  | 'apiKeyId'
  | 'wallet'
  | 'model'
  | 'provider'
  | 'deployment'
  | 'promptTokens'
  | 'completionTokens'
  | 'reasoningTokens'
  | 'cachedTokens'
  | 'charged'
  | 'providerCost'
  | 'status'
  | 'latencyMs'
  | 'estimated'
  | 'at'
>;

/**
 * The request's usage row: written once per request (request_id is unique), by its finish or its
 * late charge, never by the sweeper. usage_totals and usage_daily add up exactly these rows.
 */
export const usageRow = (rows: Rows, v: UsageRow): string =>
  `INSERT INTO request_usage
  (request_id, api_key_id, wallet, model, provider, deployment, prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens,
   charged_usdc, provider_cost_usdc, status, latency_ms, estimated, created_at)
  ${rows([
    v.requestId,
    v.apiKeyId,
    v.wallet,
    v.model,
    v.provider,
    v.deployment,
    v.promptTokens,
    v.completionTokens,
    v.reasoningTokens,
    v.cachedTokens,
    v.charged,
    v.providerCost,
    v.status,
    v.latencyMs,
    v.estimated,
    v.at,
  ])}`;

/** A request that charged nothing books no provider cost (the platform's revenue is charged − cost)... */
export const bookedCost = (charged: number, providerCostUsdc: number): number => (charged > 0 ? providerCostUsdc : 0);
/** ...and the same rule inside one statement. */
export const bookedCostSql = (charged: string, providerCost: string): string => `CASE WHEN ${charged} > 0 THEN ${providerCost} ELSE 0 END`;

/** The request's own figures, named as the usage, totals and daily fragments' operands. */
export function usageFigures(u: UsageRecord) {
  return {
    apiKeyId: u.apiKeyId,
    model: u.model,
    provider: u.provider,
    deployment: u.deployment ?? null,
    promptTokens: u.promptTokens,
    completionTokens: u.completionTokens,
    reasoningTokens: u.reasoningTokens,
    cachedTokens: u.cachedTokens,
    status: u.status,
    latencyMs: u.latencyMs,
    estimated: u.estimated ? 1 : 0,
  };
}
