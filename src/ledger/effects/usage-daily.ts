import type { Rows } from './statement.ts';
import type { UsageRow } from './usage-row.ts';

/** The day's totals add up the usage row's own values, under its UTC day number (usageDay in ../days.ts). */
export type DailyAddition = Pick<UsageRow, 'wallet' | 'apiKeyId' | 'promptTokens' | 'completionTokens' | 'charged'> & { day: string };

const ACCUMULATE_DAILY = `ON CONFLICT (wallet, day, api_key_id) DO UPDATE SET
    request_count = usage_daily.request_count + excluded.request_count,
    prompt_tokens = usage_daily.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = usage_daily.completion_tokens + excluded.completion_tokens,
    charged_usdc = usage_daily.charged_usdc + excluded.charged_usdc`;

/**
 * The usage row just written, added to the wallet's totals for its day (the dashboard's 30-day
 * chart reads them), in the same unit as the row, so the two never disagree; checkLedger verifies it.
 * `requests`: how many usage rows it adds, as for the totals.
 */
export const addToDaily = (rows: Rows, v: DailyAddition, requests = '1'): string =>
  `INSERT INTO usage_daily (wallet, day, api_key_id, request_count, prompt_tokens, completion_tokens, charged_usdc)
  ${rows([v.wallet, v.day, v.apiKeyId, requests, v.promptTokens, v.completionTokens, v.charged])}
  ${ACCUMULATE_DAILY}`;
