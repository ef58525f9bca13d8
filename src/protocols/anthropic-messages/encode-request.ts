import type { AnthropicRequest } from './types.ts';
import { conversation } from './messages.ts';
import { refuse, type Translated } from '../translated.ts';
import { thinkingFor } from './thinking.ts';
import { toolChoice, tools } from './tools.ts';

/** Fields translated below, one by one. */
const TRANSLATED = new Set([
  'model',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'stop',
  'temperature',
  'top_p',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'thinking',
  'reasoning_effort',
  'stream',
  'user',
  'safety_identifier',
  'n',
  'response_format',
]);

/**
 * OpenAI fields Anthropic has no word for and whose absence leaves the answer as the client expects:
 * usage always comes in Anthropic's stream, `seed` is best effort by OpenAI's own definition, and
 * the plan has already refused every value of store, service_tier and modalities that matters.
 * OpenAI's `metadata` tags and `prompt_cache_key` are hints for OpenAI's own dashboard and cache.
 */
const DROPPED = new Set(['stream_options', 'seed', 'store', 'service_tier', 'modalities', 'metadata', 'prompt_cache_key']);

/** Fields refused unless neutral: the client asked for something Anthropic would silently not do. */
const UNSUPPORTED: Readonly<Record<string, (v: unknown) => boolean>> = {
  logprobs: (v) => v === true,
  top_logprobs: (v) => v !== null && v !== undefined && v !== 0,
  logit_bias: (v) => typeof v === 'object' && v !== null && Object.keys(v).length > 0,
  presence_penalty: (v) => typeof v === 'number' && v !== 0,
  frequency_penalty: (v) => typeof v === 'number' && v !== 0,
  verbosity: (v) => v !== null && v !== undefined,
  functions: (v) => v !== null && v !== undefined,
  function_call: (v) => v !== null && v !== undefined,
};

/**
 * The gateway's internal request (an OpenAI chat-completions body, as the chat plan leaves it:
 * model resolved, the output limit explicit) as an Anthropic Messages request. What Anthropic
 * cannot honour is refused, never dropped in silence; fields neither side knows (an operator's
 * `extraFields`, such as Anthropic's own `top_k`) go through as sent.
 */
export function toAnthropicRequest(body: Record<string, unknown>): Translated<AnthropicRequest> {
  for (const [field, unsupported] of Object.entries(UNSUPPORTED)) {
    if (unsupported(body[field])) return refuse(field, `${field} is not supported by Anthropic models; remove it from the request`);
  }
  if (body.n !== undefined && body.n !== null && body.n !== 1)
    return refuse('n', 'n above 1 is not supported by Anthropic models (they return one answer per request); send n: 1 and repeat the request');
  const format = (body.response_format as { type?: unknown } | null | undefined)?.type;
  if (format !== undefined && format !== 'text') {
    return refuse(
      'response_format',
      `response_format ${JSON.stringify(format)} is not supported by Anthropic models; describe the JSON you want in the prompt, or use a tool whose input_schema is your schema`,
    );
  }

  const maxTokens = body.max_tokens ?? body.max_completion_tokens;
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)
    return refuse('max_tokens', 'max_tokens is required by Anthropic models and must be a positive whole number');
  if (typeof body.model !== 'string' || !body.model) return refuse('model', 'model must be a string');
  if (!Array.isArray(body.messages)) return refuse('messages', 'messages must be an array');
  if (typeof body.temperature === 'number' && body.temperature > 1) return refuse('temperature', 'temperature must be from 0 to 1 on Anthropic models');

  const talk = conversation(body.messages);
  if (!talk.ok) return talk;
  const toolList = tools(body.tools);
  if (!toolList.ok) return toolList;
  const choice = toolChoice(body.tool_choice, body.parallel_tool_calls);
  if (!choice.ok) return choice;
  const thinking = thinkingFor(body.thinking, body.reasoning_effort, maxTokens);
  if (!thinking.ok) return thinking;
  const stop = stopSequences(body.stop);
  if (!stop.ok) return stop;

  const out: AnthropicRequest = { model: body.model, max_tokens: maxTokens, messages: talk.value.messages };
  if (talk.value.system.length) out.system = talk.value.system;
  if (stop.value) out.stop_sequences = stop.value;
  if (typeof body.temperature === 'number') out.temperature = body.temperature;
  if (typeof body.top_p === 'number') out.top_p = body.top_p;
  if (toolList.value) out.tools = toolList.value;
  if (choice.value) out.tool_choice = choice.value;
  const leftOff = (isEnabled(thinking.value) && toolTurnWithoutThinking(out.messages)) || (thinks(thinking.value) && forcesTool(out.tool_choice));
  if (thinking.value !== undefined && !leftOff) out.thinking = thinking.value;
  const user = body.user ?? body.safety_identifier;
  if (typeof user === 'string' && user) out.metadata = { user_id: user };
  if (body.stream === true) out.stream = true;
  for (const [field, value] of Object.entries(body)) {
    if (!TRANSLATED.has(field) && !DROPPED.has(field) && !Object.hasOwn(UNSUPPORTED, field)) out[field] = value;
  }
  if (thinks(out.thinking)) leaveOutSamplingThinkingRefuses(out);
  return { ok: true, value: out };
}

/**
 * Anthropic refuses a temperature other than 1, any top_k, and a top_p below 0.95 beside thinking
 * (its extended-thinking docs, "sampling parameters"); OpenAI's reasoning models take them, and
 * OpenAI clients send them by default (LangChain's temperature, an app's fixed sampling settings).
 * A client that asked for reasoning wants reasoning: thinking is kept and those fields are left out
 * of the request, so the model samples at its defaults. Where thinking is left off (a forced tool,
 * a tool loop's continuation) they go through as sent.
 */
function leaveOutSamplingThinkingRefuses(out: AnthropicRequest): void {
  if (out.temperature !== undefined && out.temperature !== 1) delete out.temperature;
  if (typeof out.top_p === 'number' && out.top_p < 0.95) delete out.top_p;
  delete out.top_k;
}

const isEnabled = (thinking: unknown) => (thinking as { type?: unknown } | null)?.type === 'enabled';
/** Thinking of either kind: enabled with a budget, or adaptive. */
const thinks = (thinking: unknown) => isEnabled(thinking) || (thinking as { type?: unknown } | null)?.type === 'adaptive';

/**
 * Whether the last assistant turn called tools without the signed thinking that preceded the calls.
 * Anthropic refuses such a turn while thinking is enabled ("a final assistant message must start with a
 * thinking block … To avoid this requirement, disable thinking"), and a client of another protocol
 * cannot always send it back: the Responses API has no place for it, and chat-completions clients
 * drop `thinking_blocks`. So thinking is left off for that request (the tool loop's continuation); the
 * next turn, which starts with a user message, thinks again.
 */
function toolTurnWithoutThinking(messages: AnthropicRequest['messages']): boolean {
  let last: AnthropicRequest['messages'][number] | undefined;
  for (let i = messages.length - 1; i >= 0 && !last; i--) if (messages[i]!.role === 'assistant') last = messages[i];
  const blocks = Array.isArray(last?.content) ? (last.content as Array<{ type?: unknown }>) : [];
  return blocks.some((b) => b.type === 'tool_use') && blocks[0]?.type !== 'thinking' && blocks[0]?.type !== 'redacted_thinking';
}

/**
 * Whether the tool choice forces a call (`any`, or a named tool). Anthropic prefills the assistant turn
 * with the call, which thinking cannot precede, and refuses both together ("Thinking may not be enabled
 * when tool_choice forces tool use"); OpenAI's reasoning models take `required` beside an effort, and
 * structured-output helpers (LangChain, the AI SDK) send just that. Thinking is left off for the request.
 */
const forcesTool = (choice: AnthropicRequest['tool_choice']) => choice?.type === 'any' || choice?.type === 'tool';

function stopSequences(stop: unknown): Translated<string[] | undefined> {
  if (stop === undefined || stop === null) return { ok: true, value: undefined };
  const list = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) return refuse('stop', 'stop must be a string or an array of strings');
  // Anthropic refuses a whitespace-only stop sequence; OpenAI clients send them (["\n"]).
  if (list.some((s) => !/\S/.test(s))) return refuse('stop', 'stop sequences must contain a non-whitespace character on Anthropic models');
  return { ok: true, value: list.length ? list : undefined };
}
