import type { Usage } from '../internal.ts';
import type { StreamDecoder, UpstreamTranslator, WireEvent } from '../upstream.ts';
import { neutralUsage } from './decode-usage.ts';
import { anthropicMessageSchema } from './schemas.ts';
import { toAnthropicRequest } from './encode-request.ts';
import { hiddenToolPromptTokens } from './tools.ts';
import { fromAnthropicResponse } from './decode-answer.ts';
import { AnthropicStreamTranslator } from './decode-stream.ts';
import type { AnthropicResponse, ContentBlock } from './types.ts';

const NON_TEXT = new Set(['image', 'document']);

/**
 * Anthropic's Messages API as an upstream translator: the internal request translated by
 * toAnthropicRequest (its refusals name the client's field), answers by fromAnthropicResponse,
 * events by one AnthropicStreamTranslator per stream.
 */
export const anthropicUpstream: UpstreamTranslator = {
  encodeRequest: (internal) => toAnthropicRequest(internal),
  nonTextBytes(encoded) {
    let bytes = 0;
    for (const m of Array.isArray(encoded.messages) ? encoded.messages : []) {
      for (const block of Array.isArray(m?.content) ? (m.content as ContentBlock[]) : []) {
        if (NON_TEXT.has(block.type)) bytes += Buffer.byteLength(JSON.stringify(block));
      }
    }
    return bytes;
  },
  hiddenPromptTokens: hiddenToolPromptTokens,
  decodeAnswer(text) {
    // Text that is not JSON throws, as a broken answer always has (the caller words the failure).
    const msg: unknown = JSON.parse(text);
    if (!anthropicMessageSchema.safeParse(msg).success) {
      return { ok: false, problem: 'the provider sent a response that is not an Anthropic message' };
    }
    // Checked as far as the outcome depends on it; blocks are read with defaults, as Anthropic's
    // newer block types pass through untouched.
    const completion = fromAnthropicResponse(msg as AnthropicResponse);
    return { ok: true, text: JSON.stringify(completion), parsed: completion, usage: completion.usage ? neutralUsage(completion.usage) : null };
  },
  streamDecoder: () => new AnthropicDecoder(),
};

class AnthropicDecoder implements StreamDecoder {
  private readonly translator = new AnthropicStreamTranslator();

  decode(data: string): WireEvent[] {
    const events: WireEvent[] = [];
    for (const out of this.translator.pushData(data)) {
      if (out.kind === 'error') events.push({ kind: 'error', providerMessage: `${out.errorType}: ${out.message}` });
      else if (out.chunk.usage)
        // Anthropic reports its usage once, in message_stop's chunk: the end of the answer.
        events.push({
          kind: 'usage',
          data: JSON.stringify(out.chunk),
          usage: neutralUsage(out.chunk.usage),
          usageOnly: out.chunk.choices.length === 0,
          ends: true,
        });
      else events.push({ kind: 'chunk', data: JSON.stringify(out.chunk) });
    }
    // After message_stop's usage chunk: the answer is complete.
    if (this.translator.finished) events.push({ kind: 'done' });
    return events;
  }

  promptUsage(): Usage | null {
    const start = this.translator.startUsage;
    return start ? neutralUsage(start) : null;
  }
}
