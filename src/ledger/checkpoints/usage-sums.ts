/** The per-key usage sums a checkpoint keeps (usage_totals' columns). */
export const USAGE_SUMS = [
  'request_count',
  'prompt_tokens',
  'completion_tokens',
  'reasoning_tokens',
  'cached_tokens',
  'charged_usdc',
  'provider_cost_usdc',
] as const;
