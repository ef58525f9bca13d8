import type { Usage } from '../internal.ts';
import type { StreamDecoder, UpstreamTranslator, WireEvent } from '../upstream.ts';
import { anthropicUpstream } from './upstream.ts';

/**
 * Anthropic's Messages API for a client that speaks it too (POST /v1/messages): the request was
 * built by the client (allowlisted, not translated), and the answer and events go back as the
 * provider wrote them. They are still decoded into the internal form alongside, because the bill,
 * the estimate and failure handling read that form.
 */
export const anthropicNativeUpstream: UpstreamTranslator = {
  encodeRequest: (body) => ({ ok: true, value: body }),
  nonTextBytes: anthropicUpstream.nonTextBytes,
  hiddenPromptTokens: anthropicUpstream.hiddenPromptTokens,
  decodeAnswer(text) {
    const decoded = anthropicUpstream.decodeAnswer(text);
    return decoded.ok ? { ...decoded, text } : decoded;
  },
  streamDecoder: () => new NativeDecoder(),
};

class NativeDecoder implements StreamDecoder {
  private readonly inner = anthropicUpstream.streamDecoder();

  decode(data: string): WireEvent[] {
    const events = this.inner.decode(data);
    // An error is re-worded by the gateway (nothing charged) and message_stop is written after the
    // settle, so neither is relayed as sent; every other event is, byte for byte.
    if (events.some((e) => e.kind === 'error' || e.kind === 'done')) return events;
    const type = eventType(data);
    return type ? [...events, { kind: 'native', event: `event: ${type}\ndata: ${oneLine(data)}\n\n` }] : events;
  }

  promptUsage(): Usage | null {
    return this.inner.promptUsage();
  }
}

/** The event's name, which Anthropic always makes its payload's `type`. */
function eventType(data: string): string | null {
  try {
    const type = (JSON.parse(data) as { type?: unknown } | null)?.type;
    return typeof type === 'string' && /^[a-z_]+$/.test(type) ? type : null;
  } catch {
    return null;
  }
}

/**
 * The event's data on one line: data sent over several `data:` lines (a pretty-printed event) is
 * joined with newlines, and relayed so after one `data: ` a client would read only its first line.
 * Written again it changes only the whitespace between tokens (a JSON string holds no raw newline);
 * a typed event is JSON (eventType parsed it).
 */
function oneLine(data: string): string {
  return data.includes('\n') ? JSON.stringify(JSON.parse(data)) : data;
}
