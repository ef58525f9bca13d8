/**
 * The gateway's internal form: what every inbound translator decodes a client's request into and
 * every upstream translator decodes a provider's answer into. It is OpenAI's chat completions
 * (requests, `chat.completion` answers, `chat.completion.chunk` events), so an OpenAI-compatible
 * provider's bytes reach an OpenAI client untouched.
 */

/**
 * The usage of one request in the gateway's neutral terms: what each upstream translator's decoder
 * returns (decodeAnswer's `usage`, a stream's `usage` events and `promptUsage`), whatever names
 * its provider reports the counts under, and the only usage that billing, usage rows, metrics and
 * the inbound encoders read. Counts are whole tokens.
 * - `input.total`: the whole prompt, its cached parts included (OpenAI's `prompt_tokens`;
 *   Anthropic's input + cache creation + cache read input tokens).
 * - `input.cacheRead`: the part read from the provider's prompt cache (OpenAI's
 *   `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`).
 * - `input.cacheWrite`: the part written to the cache (Anthropic's `cache_creation_input_tokens`;
 *   OpenAI reports none).
 * - `input.cacheReadPrice`: which of the catalog's two cache-read prices the reads are billed at,
 *   as the decoder knows its provider bills them: `cachedPrompt` (OpenAI's cached-input price, the
 *   default when absent) or `cacheRead` (Anthropic's cache-read price, for reads reported in
 *   Anthropic's terms, by Anthropic or by an OpenAI-compatible proxy in front of it).
 * - `output.total`: every generated token, reasoning included (`completion_tokens`, `output_tokens`).
 * - `output.reasoning`: the reasoning part of it (`completion_tokens_details.reasoning_tokens`).
 * - `estimated`: counted by the gateway (src/metered/usage-estimate.ts) because the provider reported none.
 * Each cached part is priced at its own price (src/providers/pricing.ts, tokenCounts).
 */
export interface Usage {
  input: { total: number; cacheRead: number; cacheWrite: number; cacheReadPrice?: 'cachedPrompt' | 'cacheRead' };
  output: { total: number; reasoning: number };
  estimated: boolean;
}

/*
 * The internal answer, as the chat pipeline and the inbound encoders read it. Field values are the
 * provider's (an OpenAI-compatible provider's JSON is passed on as it came, checked only for its
 * `choices`), so every leaf is `unknown` and each reader checks the type it needs; the Anthropic
 * translator's own output (anthropic-messages/decode-answer.ts, decode-stream.ts) is a precise
 * instance of these shapes.
 */

/** OpenAI's usage object; read into a Usage by openai-chat/decode-usage.ts, never field by field. */
export interface InternalUsage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
  completion_tokens_details?: { reasoning_tokens?: unknown } | null;
}

/** One tool call of a message, or one piece of it in a stream delta (with its `index`). */
export interface InternalToolCall {
  index?: unknown;
  id?: unknown;
  type?: unknown;
  function?: { name?: unknown; arguments?: unknown } | null;
}

/**
 * A choice's message, or a stream chunk's delta: the answer (`content`, a string; a prompt message
 * may carry an array of parts), a refusal, the reasoning some providers send beside it
 * (`reasoning_content` from DeepSeek, vLLM and the Anthropic translator, `reasoning` from
 * OpenRouter), and tool or legacy function calls.
 */
export interface InternalMessage {
  role?: unknown;
  name?: unknown;
  content?: unknown;
  refusal?: unknown;
  reasoning_content?: unknown;
  reasoning?: unknown;
  tool_calls?: unknown;
  function_call?: { name?: unknown; arguments?: unknown } | null;
}

/** A `chat.completion`: the one thing the upstream translators guarantee is the `choices` array. */
export interface InternalCompletion {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  choices: ({ index?: unknown; message?: InternalMessage | null; finish_reason?: unknown } | null | undefined)[];
  usage?: InternalUsage | null;
}

/** A `chat.completion.chunk`; the last one of a stream carries `usage` and no choices. */
export interface InternalChunk {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  choices?: ({ index?: unknown; delta?: InternalMessage | null; finish_reason?: unknown } | null | undefined)[];
  usage?: InternalUsage | null;
}
