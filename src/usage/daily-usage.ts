/**
 * One key's usage on one UTC day, as GET /v1/usage/daily answers it. A module of its own, with no
 * imports, so that the dashboard's bundle (web/api.ts) reads the same type as the server writes.
 */
export interface DailyUsage {
  /** UTC date, YYYY-MM-DD. */
  date: string;
  api_key_id: number;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  charged_usdc: number;
}
