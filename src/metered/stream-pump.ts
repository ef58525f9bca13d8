import { createParser, type EventSourceParser } from 'eventsource-parser';
import type { StreamDecoder } from '../protocols/upstream.ts';
import type { StreamEncoder } from '../protocols/inbound.ts';
import { parseJsonLoosely } from '../json.ts';
import { redactCredentials } from './upstream-error.ts';
import { StreamedText } from './streamed-text.ts';
import type { Usage } from '../protocols/internal.ts';
import { billedUsage, type EstimateInput } from './usage-estimate.ts';

/**
 * The most characters one provider event may hold (its unfinished lines and data). Providers stream
 * a token or a few per event; even one that sends a whole long answer as a single event (128k
 * tokens of escaped text) stays far below it.
 */
export const MAX_EVENT_CHARS = 16 * 1024 * 1024;

/**
 * The bytes side of a stream, apart from the socket, the bill and the timers (stream.ts), so it can
 * be tested by feeding it provider bytes: it parses the provider's SSE, decodes each event with the
 * provider's upstream translator, encodes it in the client's protocol, and keeps what the bill needs (the usage
 * the provider reported, the text it streamed, whether it said it was done, the error it reported).
 * The upstream translator hands over the usage in neutral terms and the chunks as text, which pass
 * through as sent (with the chunk it parsed, when it did, for the text kept for the estimate).
 */
export class StreamPump {
  /** The usage the provider reported; null until (unless) it sends it. */
  usage: Usage | null = null;
  /** The provider said the answer is complete. */
  sawDone = false;
  /** The provider ended its answer: a usage-only chunk, or a finish_reason beside its usage. */
  private sawEnd = false;
  /** Why the stream failed, in words for the client's error event; null while it has not. */
  error: string | null = null;
  private readonly streamed = new StreamedText();
  private readonly text = new TextDecoder();
  private readonly pending: string[] = [];
  private readonly parser: EventSourceParser;

  /** `onContent`: a content chunk was decoded (the bill marks the first token). */
  constructor(
    private readonly decoder: StreamDecoder,
    readonly encoder: StreamEncoder,
    private readonly plan: EstimateInput,
    onContent: () => void = () => undefined,
  ) {
    this.parser = createParser({
      // One event held whole until its blank line: bounded, so a provider that never ends one (bytes
      // keep coming, so no idle timeout fires) fails the stream instead of filling the memory.
      maxBufferSize: MAX_EVENT_CHARS,
      onError: (err) => {
        if (err.type === 'max-buffer-size-exceeded') this.error ??= `the provider sent an event over ${MAX_EVENT_CHARS} characters`;
      },
      onEvent: (event) => {
        // The answer is complete at the provider's end marker: what follows it is read only so the
        // connection is kept (stream.ts), never relayed or billed, as the openai SDK ignores it too.
        if (this.sawDone) return;
        const decoded = this.decoder.decode(event.data);
        // An event named `error` is a failure whatever its data holds (the openai SDK raises any
        // `event: error`): one whose payload the decoder does not read as an error (a bare
        // `{"message": …}`) must not be relayed as a chunk and the answer billed at its [DONE].
        if (event.event === 'error' && !decoded.some((e) => e.kind === 'error')) {
          this.error = providerReported(namedErrorMessage(event.data));
          return;
        }
        for (const e of decoded) {
          if (e.kind === 'native') {
            this.pending.push(this.encoder.native?.(e.event) ?? '');
          } else if (e.kind === 'done') {
            this.sawDone = true;
          } else if (e.kind === 'error') {
            // The rest of this event is dropped; events after it in the same piece are still
            // encoded, which is harmless: the caller stops reading once the piece is sent.
            this.error = e.problem ?? providerReported(e.providerMessage);
            return;
          } else if (e.kind === 'usage') {
            // The newest report is the bill's: one it cannot use (a count missing) leaves the stream
            // to be estimated, rather than an earlier chunk's partial figures.
            this.usage = e.usage;
            if (e.ends) this.sawEnd = true;
            // A chunk with choices is content too (vLLM puts a usage on every chunk): counted for the estimate.
            if (!e.usageOnly) {
              onContent();
              this.streamed.add(e.data, e.parsed);
            }
            this.pending.push(this.encoder.chunk(e.data, e.usageOnly));
          } else {
            onContent();
            this.streamed.add(e.data, e.parsed);
            this.pending.push(this.encoder.chunk(e.data, false));
          }
        }
      },
    });
  }

  /** One piece of the provider's body in; the bytes to send the client for it out ('' for none). */
  feed(piece: Uint8Array): string {
    // After the end marker nothing is parsed at all: an endless event there (over MAX_EVENT_CHARS)
    // would otherwise fail, and void, the answer the client already has whole.
    if (this.sawDone) return '';
    this.parser.feed(this.text.decode(piece, { stream: true }));
    if (!this.pending.length) return '';
    const out = this.pending.join('');
    this.pending.length = 0;
    return out;
  }

  /**
   * The provider's body ended: a stream with no end marker, no usage-only chunk and no finish beside
   * its usage was cut short upstream (a usage on a content chunk, as vLLM sends on every one, is no end).
   */
  ended(): void {
    if (!this.error && !this.sawDone && !this.sawEnd) this.error = 'the provider ended the stream early';
  }

  /**
   * What was produced so far, priced if the request ends here: the provider's own figures once it
   * sent them, otherwise the tokens counted from what it streamed. A provider that reported the
   * prompt side early (Anthropic's message_start) has it billed exactly.
   */
  async produced(): Promise<Usage> {
    return billedUsage(this.plan, this.usage, () => this.streamed.text(), this.decoder.promptUsage());
  }
}

/** The client's words for an error the provider reported mid-stream, its own message (credentials removed) quoted. */
function providerReported(providerMessage: string | undefined): string {
  return `the provider reported an error${providerMessage ? `: ${redactCredentials(providerMessage).slice(0, 300)}` : ''}`;
}

/** The message of an event named `error`: its `error.message`, its `message`, or its text when that is not JSON. */
function namedErrorMessage(data: string): string | undefined {
  const payload = parseJsonLoosely(data);
  if (payload === undefined) return data.trim() || undefined;
  const message = payload?.error?.message ?? payload?.message;
  return typeof message === 'string' ? message : undefined;
}
