/**
 * The gateway's internal form: what every inbound translator decodes a client's request into and
 * every upstream translator decodes a provider's answer into. It is OpenAI's chat completions
 * (requests, `chat.completion` answers, `chat.completion.chunk` events), so an OpenAI-compatible
 * provider's bytes reach an OpenAI client untouched.
 */

/**
 * Token counts as the provider reported them, or as the gateway counted them when it reported none
 * (`estimated`). `promptTokens` is the whole prompt, cached parts included; reasoning and cached
 * tokens are parts of the totals, never added to them. The cached parts, each priced on its own:
 * - `cachedPromptTokens`: OpenAI-style cached reads (`prompt_tokens_details.cached_tokens`);
 * - `cacheWriteTokens` / `cacheReadTokens`: Anthropic's cache creation and cache read input tokens;
 * - `cachedTokens`: cached reads of either kind, what the usage row records.
 */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  cachedPromptTokens?: number;
  cacheWriteTokens?: number;
  cacheReadTokens?: number;
  estimated: boolean;
}
