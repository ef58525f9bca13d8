import type { AnthropicUsage, ContentBlock } from './types.ts';
import { TextBuilder } from '../text-builder.ts';
import { finishReason } from './finish-reason.ts';
import { reportedUsage, type TranslatedUsage } from './decode-usage.ts';

export interface ChunkChoice {
  index: 0;
  delta: Record<string, unknown>;
  logprobs: null;
  finish_reason: string | null;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: ChunkChoice[];
  usage?: TranslatedUsage;
}

/**
 * What one Anthropic event becomes: chunks to relay, or the provider's `error` event (an
 * `overloaded_error` mid-stream), which the caller turns into the specification's error event and
 * which ends the stream unbilled.
 */
export type StreamOutput = { kind: 'chunk'; chunk: ChatCompletionChunk } | { kind: 'error'; errorType: string; message: string };

interface OpenBlock {
  type: string;
  toolIndex?: number;
  /** A tool_use block's input as its start carried it, until a delta sends arguments (then undefined). */
  unsentInput?: unknown;
  thinking: TextBuilder;
  signature: TextBuilder;
  data?: string;
}

/**
 * Turns Anthropic's stream events into OpenAI chat.completion.chunk objects, one stream per
 * instance. Anthropic numbers every content block (text, thinking, tool_use); OpenAI numbers tool
 * calls alone, so tool_use blocks get their own 0-based `index` in order of appearance. The finish
 * chunk comes from `message_delta`, the usage chunk from `message_stop`, as OpenAI orders them.
 */
export class AnthropicStreamTranslator {
  private id = '';
  private model = '';
  private readonly blocks = new Map<number, OpenBlock>();
  private toolCount = 0;
  private started: AnthropicUsage | undefined;
  private final: AnthropicUsage | undefined;
  private stopped = false;

  constructor(private readonly created = Math.floor(Date.now() / 1000)) {}

  /** `message_stop` arrived: the stream is complete (a cut stream never gets here). */
  get finished(): boolean {
    return this.stopped;
  }

  /** The usage to bill, once `message_delta` has reported the final output count; null before or without one. */
  get usage(): TranslatedUsage | null {
    return typeof this.final?.output_tokens === 'number' ? reportedUsage({ ...this.started, ...this.final }) : null;
  }

  /**
   * What `message_start` reported. Its input and cache counts are final, its output count is not:
   * for a stream cut before `message_delta`, the prompt side of the bill is known exactly.
   */
  get startUsage(): TranslatedUsage | null {
    return reportedUsage(this.started);
  }

  /** One event's `data:` JSON; text that is not JSON is a broken stream, reported as an error. */
  pushData(data: string): StreamOutput[] {
    let event: unknown;
    try {
      event = JSON.parse(data);
    } catch {
      return [{ kind: 'error', errorType: 'invalid_event', message: 'the provider sent an event that is not JSON' }];
    }
    return this.push(event);
  }

  push(event: unknown): StreamOutput[] {
    const e = (event ?? {}) as Record<string, any>;
    switch (e.type) {
      case 'message_start': {
        const m = e.message ?? {};
        this.id = String(m.id ?? '');
        this.model = String(m.model ?? '');
        if (m.usage) this.started = definedCounts(m.usage);
        return [this.chunk({ role: 'assistant', content: '' })];
      }
      case 'content_block_start':
        return this.startBlock(Number(e.index), e.content_block ?? {});
      case 'content_block_delta':
        return this.delta(Number(e.index), e.delta ?? {});
      case 'content_block_stop':
        return this.stopBlock(Number(e.index));
      case 'message_delta': {
        // Later events repeat or raise the counts (output is cumulative), so the newest wins per field.
        if (e.usage) this.final = { ...this.final, ...definedCounts(e.usage) };
        const reason = finishReason(e.delta?.stop_reason);
        return reason ? [this.chunk({}, reason)] : [];
      }
      case 'message_stop': {
        this.stopped = true;
        const usage = this.usage;
        return usage ? [{ kind: 'chunk', chunk: { ...this.base(), choices: [], usage } }] : [];
      }
      case 'error':
        return [{ kind: 'error', errorType: String(e.error?.type ?? 'api_error'), message: String(e.error?.message ?? 'the provider reported an error') }];
      default:
        // ping, and event types added after this was written (Anthropic's versioning policy allows them).
        return [];
    }
  }

  private startBlock(index: number, block: Record<string, any>): StreamOutput[] {
    const open: OpenBlock = { type: String(block.type), thinking: new TextBuilder(), signature: new TextBuilder() };
    this.blocks.set(index, open);
    if (block.type === 'tool_use') {
      open.toolIndex = this.toolCount++;
      open.unsentInput = block.input ?? {};
      return [this.chunk({ tool_calls: [{ index: open.toolIndex, id: block.id, type: 'function', function: { name: block.name, arguments: '' } }] })];
    }
    if (block.type === 'redacted_thinking') open.data = String(block.data ?? '');
    // Blocks normally start empty and fill through deltas; a start that carries text is relayed too.
    if (block.type === 'text' && block.text) return [this.chunk({ content: block.text })];
    if (block.type === 'thinking' && block.thinking) {
      open.thinking.append(block.thinking);
      return [this.chunk({ reasoning_content: block.thinking })];
    }
    return [];
  }

  private delta(index: number, d: Record<string, any>): StreamOutput[] {
    const open = this.blocks.get(index);
    switch (d.type) {
      case 'text_delta':
        return d.text ? [this.chunk({ content: d.text })] : [];
      case 'input_json_delta':
        if (open?.toolIndex === undefined || !d.partial_json) return [];
        open.unsentInput = undefined;
        return [this.chunk({ tool_calls: [{ index: open.toolIndex, function: { arguments: d.partial_json } }] })];
      case 'thinking_delta':
        if (open) open.thinking.append(d.thinking ?? '');
        return d.thinking ? [this.chunk({ reasoning_content: d.thinking })] : [];
      case 'signature_delta':
        if (open) open.signature.append(d.signature ?? '');
        return [];
      default:
        return [];
    }
  }

  /**
   * A finished thinking block goes out whole, signature included, as the JSON answer carries it. A
   * tool call that streamed no arguments (Anthropic sends a tool without parameters as one empty
   * `input_json_delta`) gets its start's input, `{}` at least, as the JSON answer does: OpenAI clients
   * parse `arguments`, and "" is not JSON.
   */
  private stopBlock(index: number): StreamOutput[] {
    const open = this.blocks.get(index);
    this.blocks.delete(index);
    if (open?.toolIndex !== undefined && open.unsentInput !== undefined) {
      return [this.chunk({ tool_calls: [{ index: open.toolIndex, function: { arguments: JSON.stringify(open.unsentInput) } }] })];
    }
    let block: ContentBlock | undefined;
    if (open?.type === 'thinking') block = { type: 'thinking', thinking: open.thinking.toString(), signature: open.signature.toString() };
    if (open?.type === 'redacted_thinking') block = { type: 'redacted_thinking', data: open.data ?? '' };
    return block ? [this.chunk({ thinking_blocks: [block] })] : [];
  }

  private base() {
    return { id: this.id, object: 'chat.completion.chunk' as const, created: this.created, model: this.model };
  }

  private chunk(delta: Record<string, unknown>, finish: string | null = null): StreamOutput {
    return { kind: 'chunk', chunk: { ...this.base(), choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] } };
  }
}

/** Only numeric counts: a `null` cache term in a later event must not erase an earlier number. */
function definedCounts(u: Record<string, unknown>): AnthropicUsage {
  return Object.fromEntries(Object.entries(u).filter(([, v]) => typeof v === 'number'));
}
