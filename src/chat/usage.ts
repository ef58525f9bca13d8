import type { ChatPlan } from './plan.ts';
import { CONTROL_FIELDS } from './forwarded-fields.ts';

/** Token counts as the provider reported them, or as we counted them when it reported none. */
export interface Usage {
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  cachedTokens: number;
  /**
   * Anthropic's prompt caching, parts of `promptTokens` as the internal usage object carries them
   * (`cache_creation_input_tokens`, `cache_read_input_tokens`); absent from other providers.
   */
  cacheWriteTokens?: number;
  cacheReadTokens?: number;
  estimated: boolean;
}

const int = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);

/** Reads OpenAI's usage object. Reasoning and cached tokens are parts of the totals, never added. */
export function readUsage(u: unknown): Usage | null {
  if (!u || typeof u !== 'object') return null;
  const o = u as Record<string, any>;
  if (typeof o.prompt_tokens !== 'number' && typeof o.completion_tokens !== 'number') return null;
  return {
    promptTokens: int(o.prompt_tokens),
    completionTokens: int(o.completion_tokens),
    reasoningTokens: int(o.completion_tokens_details?.reasoning_tokens),
    cachedTokens: int(o.prompt_tokens_details?.cached_tokens),
    ...(o.cache_creation_input_tokens !== undefined || o.cache_read_input_tokens !== undefined
      ? { cacheWriteTokens: int(o.cache_creation_input_tokens), cacheReadTokens: int(o.cache_read_input_tokens) }
      : {}),
    estimated: false,
  };
}

/** The countable text of tool calls: each function's name and its arguments. */
function toolCallsText(calls: unknown): string {
  if (!Array.isArray(calls)) return '';
  return calls.map((t) => `${t?.function?.name ?? ''}${t?.function?.arguments ?? ''}`).join('');
}

/**
 * The generated text of one choice's message (or stream delta), everything the provider bills as
 * completion tokens and the client receives: the answer, a refusal, the reasoning some providers
 * send beside it (`reasoning_content` from DeepSeek and vLLM, `reasoning` from OpenRouter), and
 * tool or function calls.
 */
export function generatedText(m: unknown): string {
  const o = (m ?? {}) as Record<string, any>;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  // Prompt messages may carry content as an array of text (or refusal) parts; deltas never do.
  const content = Array.isArray(o.content) ? o.content.map((p: any) => str(p?.text) || str(p?.refusal)).join('') : str(o.content);
  const call = o.function_call ? `${str(o.function_call.name)}${str(o.function_call.arguments)}` : '';
  return `${str(o.reasoning_content)}${str(o.reasoning)}${content}${str(o.refusal)}${toolCallsText(o.tool_calls)}${call}`;
}

let tokenizer: Promise<(text: string) => number> | undefined;

/** Counts tokens with the o200k tokenizer, loaded only the first time an upstream omits usage. */
async function countTokens(text: string): Promise<number> {
  tokenizer ??= import('gpt-tokenizer').then((m) => (t: string) => m.countTokens(t));
  return (await tokenizer)(text);
}

/** What the estimate reads from the plan: the body as sent and the bounds it was reserved at. */
export type EstimateInput = Pick<ChatPlan, 'upstreamBody' | 'parts' | 'promptUpperBound' | 'maxTokens' | 'n'>;

/** The text a provider renders into the prompt from one message: its name and its text as generated. */
function messageText(m: unknown): string {
  const name = (m as { name?: unknown } | null)?.name;
  return `${typeof name === 'string' ? name : ''}${generatedText(m)}`;
}

/**
 * Usage counted with the tokenizer, for an upstream that reported none or a drain that was cut;
 * marked as estimated. It counts every input the reservation bounded: the messages' text, each
 * other input field (tools, functions, response_format, tool_choice, provider extensions) as its
 * JSON, and each declared non-text part at its bound. Each side is capped at what was reserved for
 * it: the provider accepted the prompt (so it fits that bound) and stops each choice at max_tokens.
 */
export async function estimateUsage(plan: EstimateInput, completionText: string): Promise<Usage> {
  const body = plan.upstreamBody;
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const inputs = Object.entries(body)
    .filter(([field]) => field !== 'messages' && !CONTROL_FIELDS.has(field))
    .map(([, value]) => JSON.stringify(value));
  const promptText = [...messages.map(messageText), ...inputs].join('\n');
  // OpenAI's chat template adds about 3 tokens a message and 3 for the reply's priming.
  const promptTokens = (await countTokens(promptText)) + 3 * messages.length + 3 + plan.parts.tokens;
  const completionTokens = completionText ? await countTokens(completionText) : 0;
  return {
    promptTokens: Math.min(promptTokens, plan.promptUpperBound),
    completionTokens: Math.min(completionTokens, plan.n * plan.maxTokens),
    reasoningTokens: 0,
    cachedTokens: 0,
    estimated: true,
  };
}
