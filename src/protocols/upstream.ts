import type { InternalCompletion, Usage } from './internal.ts';
import type { Translated } from './translated.ts';

/**
 * How one provider's wire format maps onto the gateway's internal form, which is OpenAI's chat
 * completions: requests are the body the chat plan produces, answers `chat.completion` JSON, stream
 * events `chat.completion.chunk` JSON ending with a usage chunk. Pure translation, no I/O: the
 * adapter (src/providers/adapter.ts) sends the bytes. An OpenAI-compatible provider's translator is the identity, so
 * its answers and events reach the client byte for byte.
 */
export interface UpstreamTranslator {
  /**
   * The provider's request body for the internal one, or a refusal naming the client's field when
   * the provider cannot honour it (a 400 before anything is reserved).
   */
  encodeRequest(internal: Record<string, unknown>): Translated<Record<string, unknown>>;
  /**
   * The UTF-8 size of the non-text parts (images, documents) inside the encoded body, which the
   * reservation replaces by their token bounds. Absent: they are the client's parts as sent.
   */
  nonTextBytes?(encoded: Record<string, unknown>): number;
  /**
   * Prompt tokens the provider adds to the encoded body and bills (Anthropic's hidden tool system
   * prompt), which its bytes do not show: the reservation adds them. Absent: none.
   */
  hiddenPromptTokens?(encoded: Record<string, unknown>): number;
  /** The provider's 2xx JSON answer as internal chat.completion JSON, or why it is not one. */
  decodeAnswer(text: string): DecodedAnswer;
  /** A decoder for one streamed answer. */
  streamDecoder(): StreamDecoder;
}

/** `usage`: the provider's usage in neutral terms, null when it reported none (the gateway estimates). */
export type DecodedAnswer = { ok: true; text: string; parsed: InternalCompletion; usage: Usage | null } | { ok: false; problem: string };

/**
 * An event carrying a usage object (not `"usage": null`), compact or spaced as Python's json.dumps
 * writes it. Generated text cannot match: its quotes are escaped (`\"usage\"`).
 */
export const USAGE_OBJECT = /"usage"\s*:\s*\{/;

export interface StreamDecoder {
  /** One server-sent event's `data:` text as internal events (none for keep-alives). */
  decode(data: string): WireEvent[];
  /**
   * The prompt side of the usage (`input`), when the provider reported it before the end
   * (Anthropic's message_start): a stream cut short then bills its prompt exactly and estimates
   * only the output. Null when the provider reports usage only at the end.
   */
  promptUsage(): Usage | null;
}

export type WireEvent =
  /**
   * An internal chat.completion.chunk, as JSON text; `parsed`: the same chunk, when the decoder parsed
   * it anyway (the bill then keeps its words rather than its JSON, src/metered/streamed-text.ts).
   */
  | { kind: 'chunk'; data: string; parsed?: unknown }
  /**
   * An internal chunk that carries the provider's usage object (its last, as a rule): that usage in
   * neutral terms (null when it holds no counts), whether the chunk has no choices (OpenAI's
   * usage-only chunk, which reaches only a client that asked for it; any content it has otherwise is
   * content), and whether it ends the answer (usage-only, or a choice's finish_reason): a usage on
   * every chunk (vLLM's continuous usage) says nothing of the end.
   */
  | { kind: 'usage'; data: string; usage: Usage | null; usageOnly: boolean; ends: boolean; parsed?: unknown }
  /**
   * A provider event as it came (`event:`/`data:` lines), for a client that speaks the provider's
   * own protocol (a native plan); the chunks decoded from it still drive the bill.
   */
  | { kind: 'native'; event: string }
  /** The provider says the answer is complete. */
  | { kind: 'done' }
  /**
   * The provider reported an error mid-stream; `providerMessage` is its own words, unredacted.
   * `problem`: the stream broke without the provider saying so (an event that is not JSON), in the
   * gateway's words.
   */
  | { kind: 'error'; providerMessage: string | undefined; problem?: string };
