import { parseJsonLoosely } from '../../json.ts';
import { mayNameACharge, namesACharge, withCharge, type Charge } from '../charge.ts';
import type { EncodePlan } from '../inbound.ts';
import type { InternalChunk, InternalMessage, InternalToolCall, Usage } from '../internal.ts';
import type { StreamEncoder } from '../inbound.ts';
import { messageId } from './encode-answer.ts';
import { anthropicUsage, stopReason } from './encode-usage.ts';

/** An event payload or block as written to the client. */
type Json = Record<string, unknown>;

/** One server-sent event as Anthropic writes it: the event name is the payload's `type`. */
export const sse = (payload: Json & { type: string }) => `event: ${payload.type}\ndata: ${JSON.stringify(payload)}\n\n`;

const MESSAGE_STOP = sse({ type: 'message_stop' });

/**
 * Anthropic's error event: a provider failure mid-stream (the message says nothing was charged).
 * Anthropic itself ends a stream this way on overload.
 */
export const errorEvent = (message: string) => sse({ type: 'error', error: { type: 'api_error', message } });

const MESSAGE_DELTA = 'event: message_delta\n';
const MESSAGE_START = 'event: message_start\n';

/**
 * A native plan's stream: the provider's events are relayed as they came (`native`), the internal
 * chunks decoded from them only drive the bill. `message_delta` (the final usage) and
 * `message_stop` are held back and written once the request is settled, the charge in
 * message_delta's usage, so a client that saw them can rely on the charge being recorded.
 */
export function nativeStreamEncoder(): StreamEncoder {
  let heldDelta: string | null = null;
  return {
    chunk: () => '',
    native(event) {
      if (event.startsWith(MESSAGE_START) && mayNameACharge(event)) return startWithoutCharge(event);
      if (!event.startsWith(MESSAGE_DELTA)) return event;
      // Anthropic sends one; a second one (its counts are cumulative) lets the earlier go as sent.
      const earlier = heldDelta === null ? '' : sse(deltaWithCharge(heldDelta, undefined));
      heldDelta = event.slice(event.indexOf('data: ') + 6).trimEnd();
      return earlier;
    },
    failure: errorEvent,
    end: (_usage, _answer, charge) => (heldDelta === null ? '' : sse(deltaWithCharge(heldDelta, charge))) + MESSAGE_STOP,
  };
}

/** A provider's message_start whose usage named a charge of its own (which clients would read as ours): without it. */
function startWithoutCharge(event: string): string {
  const start = parseJsonLoosely(event.slice(event.indexOf('data: ') + 6).trimEnd()) as Json | undefined;
  const message = start?.message as Json | undefined;
  if (!message || typeof message.usage !== 'object' || message.usage === null || !namesACharge(message.usage)) return event;
  return sse({ ...start, type: 'message_start', message: { ...message, usage: withCharge(message.usage, undefined) } });
}

/** A provider's message_delta with the charge in its usage (and no charge fields of its own). */
function deltaWithCharge(data: string, charge: Charge | undefined): Json & { type: string } {
  const delta = (parseJsonLoosely(data) ?? {}) as Json;
  const usage = typeof delta.usage === 'object' && delta.usage !== null ? delta.usage : {};
  return { ...delta, type: 'message_delta', usage: withCharge(usage, charge) };
}

/**
 * Internal chat.completion.chunk events (from an OpenAI-compatible provider) as Anthropic's stream:
 * message_start, then one content block per kind of delta (thinking, text, each tool call) with
 * content_block_start / _delta / _stop, then message_delta with the stop reason and the billed
 * usage, and message_stop. The usage chunk the gateway asks every provider for is not relayed:
 * message_delta carries the usage that was billed.
 */
export function translatingStreamEncoder(plan: EncodePlan): StreamEncoder {
  let started = false;
  let open: { index: number; kind: string } | null = null;
  let blocks = 0;
  let finish: unknown = null;
  const toolBlocks = new Map<number, number>();

  const start = (chunk: InternalChunk): string => {
    if (started) return '';
    started = true;
    const message = {
      id: messageId(chunk.id),
      type: 'message',
      role: 'assistant',
      model: chunk.model ?? plan.model.upstreamName,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    return sse({ type: 'message_start', message });
  };
  const close = (): string => {
    if (!open) return '';
    const out = sse({ type: 'content_block_stop', index: open.index });
    open = null;
    return out;
  };
  const openBlock = (kind: string, block: Json): string => {
    const out = close() + sse({ type: 'content_block_start', index: blocks, content_block: block });
    open = { index: blocks++, kind };
    return out;
  };
  const delta = (kind: string, block: Json, d: Json): string => {
    const opening = open?.kind === kind ? '' : openBlock(kind, block);
    return opening + sse({ type: 'content_block_delta', index: open!.index, delta: d });
  };

  return {
    chunk(data, usageOnly) {
      if (usageOnly) return '';
      const chunk: InternalChunk = parseJsonLoosely(data) ?? {};
      let out = start(chunk);
      const choice = chunk.choices?.[0];
      const d: InternalMessage = choice?.delta ?? {};
      const reasoning = `${typeof d.reasoning_content === 'string' ? d.reasoning_content : ''}${typeof d.reasoning === 'string' ? d.reasoning : ''}`;
      if (reasoning) out += delta('thinking', { type: 'thinking', thinking: '' }, { type: 'thinking_delta', thinking: reasoning });
      if (typeof d.content === 'string' && d.content) out += delta('text', { type: 'text', text: '' }, { type: 'text_delta', text: d.content });
      // An OpenAI model's refusal streams as text, as the JSON answer carries it (encodeMessage).
      if (typeof d.refusal === 'string' && d.refusal) out += delta('text', { type: 'text', text: '' }, { type: 'text_delta', text: d.refusal });
      for (const call of (Array.isArray(d.tool_calls) ? d.tool_calls : []) as InternalToolCall[]) {
        const toolIndex = Number(call?.index ?? 0);
        if (!toolBlocks.has(toolIndex)) {
          out += openBlock(`tool${toolIndex}`, { type: 'tool_use', id: call.id ?? `toolu_${toolIndex}`, name: call.function?.name ?? '', input: {} });
          toolBlocks.set(toolIndex, open!.index);
        }
        const args = call.function?.arguments;
        if (typeof args === 'string' && args)
          out += sse({ type: 'content_block_delta', index: toolBlocks.get(toolIndex)!, delta: { type: 'input_json_delta', partial_json: args } });
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      return out;
    },
    failure: errorEvent,
    end(usage?: Usage, _answer?: string, charge?: Charge) {
      const out = start({}) + close();
      const billed = withCharge(usage ? anthropicUsage(usage) : { output_tokens: 0 }, charge);
      return out + sse({ type: 'message_delta', delta: { stop_reason: stopReason(finish), stop_sequence: null }, usage: billed }) + MESSAGE_STOP;
    },
  };
}
