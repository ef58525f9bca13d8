import type { InternalMessage, Usage } from '../protocols/internal.ts';
import type { ChatPlan } from './plan.ts';
import { CONTROL_FIELDS } from '../protocols/openai-chat/request-fields.ts';

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
  const o = (m ?? {}) as InternalMessage;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  // Prompt messages may carry content as an array of text (or refusal) parts; deltas never do.
  const content = Array.isArray(o.content) ? o.content.map((p: { text?: unknown; refusal?: unknown } | null) => str(p?.text) || str(p?.refusal)).join('') : str(o.content);
  const call = o.function_call ? `${str(o.function_call.name)}${str(o.function_call.arguments)}` : '';
  return `${str(o.reasoning_content)}${str(o.reasoning)}${content}${str(o.refusal)}${toolCallsText(o.tool_calls)}${call}`;
}

let tokenizer: Promise<(text: string) => number> | undefined;

/** Counts tokens with the o200k tokenizer, loaded only the first time an upstream omits usage. */
export async function countTokens(text: string): Promise<number> {
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
    input: { total: Math.min(promptTokens, plan.promptUpperBound), cacheRead: 0, cacheWrite: 0 },
    output: { total: Math.min(completionTokens, plan.n * plan.maxTokens), reasoning: 0 },
    estimated: true,
  };
}
