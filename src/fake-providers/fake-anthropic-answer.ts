import { createHash } from 'node:crypto';
import { fakeTokens } from './fake-openai.ts';

/** What the fake Anthropic provider is told to answer; the stream and the JSON carry the same answer. */
export interface FakeAnthropicBehaviour {
  /** A provider that writes its own bytes: rewrites the JSON message's text before it is sent. */
  rewriteAnswer?: (json: string) => string;
  /** Text of the answer, streamed one word per `text_delta`. */
  content?: string;
  /** A thinking block before the answer, sent only when the request enables `thinking`, as Anthropic does. */
  reasoning?: string;
  /** Answer with these tool_use blocks (after a text block only when `content` is set too). */
  toolCalls?: { name: string; input: Record<string, unknown> }[];
  /** Overrides the usage the provider reports (cache terms default to 0). */
  usage?: { input_tokens?: number; output_tokens?: number; cache_creation_input_tokens?: number; cache_read_input_tokens?: number };
  /** Leave usage out entirely (JSON, message_start and message_delta). */
  omitUsage?: boolean;
  /** More fields in the usage object (a provider claiming a charge of its own, such as `cost`). */
  usageExtra?: Record<string, unknown>;
  /** Events serialised with spaces after `:` and `,`, as Anthropic's documentation prints them. */
  spacedJson?: boolean;
  /** Wait before the response starts. */
  delayMs?: number;
  /** Wait between stream events. */
  chunkDelayMs?: number;
  /** Fail with this HTTP status and Anthropic's error body for it. */
  failStatus?: number;
  /** With failStatus: a Retry-After header, as Anthropic sends with 429 and 529. */
  retryAfter?: string;
  /** Accept the connection and never answer. */
  hang?: boolean;
  /** Destroy the connection after this many text deltas. */
  cutAfterChunks?: number;
  /** Send an `overloaded_error` event after this many text deltas and end the stream. */
  overloadAfterChunks?: number;
  /** Bill each image or document block at this many input tokens instead of its JSON. */
  partTokens?: number;
}

export const FAKE_ANTHROPIC_CONTENT = 'Hello from the fake Anthropic provider, a stand-in for a paid model.';

export type Block =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

export interface Answer {
  content: Block[];
  stop_reason: 'end_turn' | 'max_tokens' | 'tool_use' | 'stop_sequence';
  stop_sequence: string | null;
  usage: { input_tokens: number; cache_creation_input_tokens: number; cache_read_input_tokens: number; output_tokens: number };
}

const NON_TEXT = new Set(['image', 'document']);

/**
 * Input tokens as Anthropic bills them, at about four characters a token: the system prompt, the
 * messages and the tool definitions, with each image or document at a fixed price.
 */
export function fakeInputTokens(body: any, partTokens: number): number {
  let parts = 0;
  const messages = (Array.isArray(body.messages) ? body.messages : []).map((m: any) => {
    if (!Array.isArray(m?.content)) return m;
    const content = m.content.filter((b: any) => !NON_TEXT.has(b?.type));
    parts += m.content.length - content.length;
    return { ...m, content };
  });
  return fakeTokens(JSON.stringify({ system: body.system, messages, tools: body.tools, tool_choice: body.tool_choice })) + parts * partTokens;
}

/**
 * The answer to one request. Output stops at `max_tokens` (stop_reason "max_tokens", the text cut
 * to fit, tool calls that do not fit left out) and at the first stop sequence found, so the fake
 * never bills past the limit the gateway reserved for, as the real provider never does.
 */
export function composeAnswer(b: FakeAnthropicBehaviour, body: any): Answer {
  let budget = Number(body.max_tokens);
  let truncated = false;
  /** The longest prefix of `text` that fits the budget, spending it. */
  const take = (text: string): string => {
    const fits = Math.min(text.length, budget * 4);
    if (fits < text.length) truncated = true;
    const kept = text.slice(0, fits);
    budget -= kept ? fakeTokens(kept) : 0;
    return kept;
  };

  const content: Block[] = [];
  if (b.reasoning && body.thinking?.type === 'enabled') {
    const thinking = take(b.reasoning);
    // Derived from the text, so two answers to one request carry the same block, as a replay would.
    if (thinking) content.push({ type: 'thinking', thinking, signature: createHash('sha256').update(thinking).digest('base64') });
  }
  let stopSequence: string | null = null;
  const wantsText = !b.toolCalls || b.content !== undefined;
  if (wantsText && !truncated) {
    let text = b.content ?? FAKE_ANTHROPIC_CONTENT;
    for (const seq of Array.isArray(body.stop_sequences) ? body.stop_sequences : []) {
      const at = text.indexOf(seq);
      if (at >= 0) {
        text = text.slice(0, at);
        stopSequence = seq;
      }
    }
    const kept = take(text);
    if (kept) content.push({ type: 'text', text: kept });
  }
  for (const [i, call] of (b.toolCalls ?? []).entries()) {
    const cost = fakeTokens(JSON.stringify(call.input)) + 5;
    if (truncated || cost > budget) {
      truncated = true;
      break;
    }
    budget -= cost;
    content.push({ type: 'tool_use', id: `toolu_fake${i}`, name: call.name, input: call.input });
  }
  const produced = Number(body.max_tokens) - budget;
  const stop_reason = truncated ? 'max_tokens' : stopSequence !== null ? 'stop_sequence' : b.toolCalls?.length ? 'tool_use' : 'end_turn';
  return {
    content,
    stop_reason,
    stop_sequence: stop_reason === 'stop_sequence' ? stopSequence : null,
    usage: {
      input_tokens: b.usage?.input_tokens ?? fakeInputTokens(body, b.partTokens ?? 0),
      cache_creation_input_tokens: b.usage?.cache_creation_input_tokens ?? 0,
      cache_read_input_tokens: b.usage?.cache_read_input_tokens ?? 0,
      output_tokens: b.usage?.output_tokens ?? produced,
      ...b.usageExtra,
    },
  };
}
