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
