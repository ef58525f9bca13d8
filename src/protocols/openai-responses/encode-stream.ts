import { parseJsonLoosely } from '../../json.ts';
import { TextBuilder } from '../text-builder.ts';
import type { EncodePlan } from '../inbound.ts';
import type { StreamEncoder } from '../inbound.ts';
import type { Charge } from '../charge.ts';
import type { InternalChunk, InternalToolCall, InternalUsage, Usage } from '../internal.ts';
import { openAIUsageOf, shownUsage } from '../openai-chat/encode-usage.ts';
import {
  functionCallItem,
  messageItem,
  newId,
  nowSeconds,
  responseObject,
  responsesUsage,
  statusOf,
  textPart,
  type ContentPart,
  type ResponseStatus,
} from './encode-answer.ts';

/** The message item being written: its text or refusal grows delta by delta. */
interface OpenMessage {
  index: number;
  id: string;
  kind: 'output_text' | 'refusal';
  text: TextBuilder;
}
/** A function call being written, by its chat tool-call index. */
interface OpenCall {
  index: number;
  id: string;
  callId: string;
  name: string;
  args: TextBuilder;
}

/**
 * One streamed answer as OpenAI Responses events (`event:` and `data:` lines, each with its
 * `sequence_number`): response.created and response.in_progress, then per output item
 * output_item.added, content_part.added, output_text.delta… (function_call_arguments.delta for
 * tool calls) and the matching .done events, then response.completed (or response.incomplete) with
 * usage. A provider failure is an `error` event and response.failed, after which nothing is charged.
 */
export class ResponsesStreamEncoder implements StreamEncoder {
  private seq = 0;
  private started = false;
  private readonly id = newId('resp');
  private readonly createdAt = nowSeconds();
  private readonly model: string;
  /** Finished output items, in output_index order (open ones are added when they close). */
  private readonly output: unknown[] = [];
  private nextIndex = 0;
  private message: OpenMessage | null = null;
  private readonly calls = new Map<number, OpenCall>();
  private usage: InternalUsage | null = null;
  private finishReason: unknown = null;
  /** Events written by `finalAnswer` (closing open items), sent by `end`. */
  private closing = '';

  constructor(plan: EncodePlan) {
    this.model = plan.model.upstreamName;
  }

  /** response.created and response.in_progress, as OpenAI sends them before the model's first token. */
  opening(): string {
    return this.start();
  }

  chunk(data: string, _usageOnly: boolean): string {
    let out = this.start();
    const c = parseJsonLoosely(data) as InternalChunk | undefined;
    if (c?.usage) this.usage = c.usage;
    const choice = Array.isArray(c?.choices) ? c.choices[0] : undefined;
    const delta = choice?.delta ?? {};
    if (typeof delta.content === 'string' && delta.content !== '') out += this.textDelta('output_text', delta.content);
    if (typeof delta.refusal === 'string' && delta.refusal !== '') out += this.textDelta('refusal', delta.refusal);
    for (const t of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) out += this.callDelta(t);
    if (choice?.finish_reason) {
      this.finishReason = choice.finish_reason;
      out += this.closeAll();
    }
    return out;
  }

  failure(message: string): string {
    const error = { code: 'server_error', message };
    return (
      this.start() +
      this.closeAll() +
      this.event('error', { code: 'upstream_error', message, param: null }) +
      this.event('response.failed', { response: this.snapshot('failed', null, error) })
    );
  }

  /**
   * The final Response (what response.completed carries, the charge in its usage, so a stored
   * Response keeps it); the events that close open items wait for `end`.
   */
  finalAnswer(billed?: Usage, charge?: Charge): string {
    this.closing += this.start() + this.closeAll();
    const { status, incomplete_details } = statusOf(this.finishReason);
    return JSON.stringify(this.snapshot(status, incomplete_details, null, { billed, charge }));
  }

  end(billed?: Usage, answer?: string, charge?: Charge): string {
    const out = this.closing + this.start() + this.closeAll();
    this.closing = '';
    const { status, incomplete_details } = statusOf(this.finishReason);
    const response = answer !== undefined ? JSON.parse(answer) : this.snapshot(status, incomplete_details, null, { billed, charge });
    return out + this.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
  }

  private event(type: string, fields: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.seq++, ...fields })}\n\n`;
  }

  /** `paid`: the billed usage and its charge, for the final Response only. */
  private snapshot(
    status: ResponseStatus | 'in_progress',
    incompleteDetails: { reason: string } | null = null,
    error: { code: string; message: string } | null = null,
    paid: { billed?: Usage; charge?: Charge } = {},
  ) {
    const usage = status === 'in_progress' ? null : responsesUsage(shownUsage(this.usage, paid.billed), paid.charge, paid.billed && openAIUsageOf(paid.billed));
    return responseObject({ id: this.id, createdAt: this.createdAt, model: this.model, status, incompleteDetails, error, output: [...this.output], usage });
  }

  private start(): string {
    if (this.started) return '';
    this.started = true;
    const response = this.snapshot('in_progress');
    return this.event('response.created', { response }) + this.event('response.in_progress', { response });
  }

  private textDelta(kind: OpenMessage['kind'], text: string): string {
    let out = '';
    // Output items are written one after another: a tool call that started closes the text before it.
    if (this.calls.size) out += this.closeCalls();
    if (this.message && this.message.kind !== kind) out += this.closeMessage();
    if (!this.message) {
      const m: OpenMessage = { index: this.nextIndex++, id: newId('msg'), kind, text: new TextBuilder() };
      this.message = m;
      out += this.event('response.output_item.added', { output_index: m.index, item: messageItem(m.id, [], 'in_progress') });
      out += this.event('response.content_part.added', { item_id: m.id, output_index: m.index, content_index: 0, part: this.part(kind, '') });
    }
    const m = this.message;
    m.text.append(text);
    const type = kind === 'output_text' ? 'response.output_text.delta' : 'response.refusal.delta';
    return out + this.event(type, { item_id: m.id, output_index: m.index, content_index: 0, delta: text, ...(kind === 'output_text' ? { logprobs: [] } : {}) });
  }

  private callDelta(t: InternalToolCall | null | undefined): string {
    const index = typeof t?.index === 'number' ? t.index : 0;
    let out = '';
    let call = this.calls.get(index);
    if (!call) {
      if (this.message) out += this.closeMessage();
      call = { index: this.nextIndex++, id: newId('fc'), callId: String(t?.id ?? ''), name: String(t?.function?.name ?? ''), args: new TextBuilder() };
      this.calls.set(index, call);
      out += this.event('response.output_item.added', { output_index: call.index, item: functionCallItem(call.id, call.callId, call.name, '', 'in_progress') });
    }
    const args = t?.function?.arguments;
    if (typeof args !== 'string' || args === '') return out;
    call.args.append(args);
    return out + this.event('response.function_call_arguments.delta', { item_id: call.id, output_index: call.index, delta: args });
  }

  private part(kind: OpenMessage['kind'], text: string): ContentPart {
    return kind === 'output_text' ? textPart(text) : { type: 'refusal', refusal: text };
  }

  private itemStatus(): 'completed' | 'incomplete' {
    return statusOf(this.finishReason).status === 'incomplete' ? 'incomplete' : 'completed';
  }

  private closeMessage(): string {
    const m = this.message;
    if (!m) return '';
    this.message = null;
    const text = m.text.toString();
    const part = this.part(m.kind, text);
    const item = messageItem(m.id, [part], this.itemStatus());
    this.output.push(item);
    const where = { item_id: m.id, output_index: m.index, content_index: 0 };
    const done =
      m.kind === 'output_text'
        ? this.event('response.output_text.done', { ...where, text, logprobs: [] })
        : this.event('response.refusal.done', { ...where, refusal: text });
    return done + this.event('response.content_part.done', { ...where, part }) + this.event('response.output_item.done', { output_index: m.index, item });
  }

  private closeCalls(): string {
    let out = '';
    for (const call of [...this.calls.values()].sort((a, b) => a.index - b.index)) {
      const args = call.args.toString();
      const item = functionCallItem(call.id, call.callId, call.name, args, 'completed');
      this.output.push(item);
      out += this.event('response.function_call_arguments.done', { item_id: call.id, output_index: call.index, name: call.name, arguments: args });
      out += this.event('response.output_item.done', { output_index: call.index, item });
    }
    this.calls.clear();
    return out;
  }

  private closeAll(): string {
    return this.closeMessage() + this.closeCalls();
  }
}
