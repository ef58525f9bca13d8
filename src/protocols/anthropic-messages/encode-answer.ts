import { parseJsonLoosely } from '../../json.ts';
import { spliceCharge, withCharge, type Charge } from '../charge.ts';
import type { InternalCompletion, InternalToolCall, Usage } from '../internal.ts';
import { anthropicUsage, stopReason } from './encode-usage.ts';

/**
 * An internal chat.completion as an Anthropic message: reasoning first as a thinking block (with no
 * signature: it did not come from Anthropic), then the text (and an OpenAI refusal, as text), then one
 * tool_use per tool call. The
 * usage is the billed one, so the client sees what it paid for even when it was estimated, with
 * the charge (src/protocols/charge.ts).
 */
export function encodeMessage(completion: InternalCompletion, usage: Usage, charge?: Charge) {
  const message = completion.choices?.[0]?.message ?? {};
  const content: Record<string, unknown>[] = [];
  const reasoning = `${message.reasoning_content ?? ''}${message.reasoning ?? ''}`;
  if (reasoning) content.push({ type: 'thinking', thinking: reasoning, signature: '' });
  if (typeof message.content === 'string' && message.content) content.push({ type: 'text', text: message.content });
  // An OpenAI model's refusal is its answer (billed as output): Messages has no refusal block, so it is text.
  if (typeof message.refusal === 'string' && message.refusal) content.push({ type: 'text', text: message.refusal });
  for (const call of (Array.isArray(message.tool_calls) ? message.tool_calls : []) as InternalToolCall[]) {
    content.push({ type: 'tool_use', id: call.id, name: call.function?.name, input: parseInput(call.function?.arguments) });
  }
  return {
    id: messageId(completion.id),
    type: 'message',
    role: 'assistant',
    model: completion.model,
    content,
    stop_reason: stopReason(completion.choices?.[0]?.finish_reason),
    stop_sequence: null,
    usage: withCharge(anthropicUsage(usage), charge),
  };
}

/**
 * The provider's own message (a native plan) with the charge in its usage. Unchanged, byte for
 * byte, without a charge or without a usage object to put it in.
 */
export function nativeMessageWithCharge(providerJson: string, charge: Charge | undefined): string {
  if (!charge) return providerJson;
  const spliced = spliceCharge(providerJson, charge);
  if (spliced !== null) return spliced;
  const message = parseJsonLoosely(providerJson);
  if (!message || typeof message !== 'object' || !message.usage || typeof message.usage !== 'object') return providerJson;
  return JSON.stringify({ ...message, usage: withCharge(message.usage, charge) });
}

/**
 * Anthropic's ids start with `msg_`; the provider's own id is kept after it. An id that already is one
 * (an Anthropic deployment served a translated request) is kept as issued, not prefixed again.
 */
export const messageId = (id: unknown) =>
  typeof id === 'string' && id.startsWith('msg_') ? id : `msg_${typeof id === 'string' && id ? id : Date.now().toString(36)}`;

/** Tool arguments as the object Anthropic's `input` is; arguments that are not a JSON object are kept as text under `_raw`. */
function parseInput(args: unknown): unknown {
  if (typeof args !== 'string' || !args) return {};
  try {
    const parsed = JSON.parse(args);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? parsed : { _raw: args };
  } catch {
    return { _raw: args };
  }
}
