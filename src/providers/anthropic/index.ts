/**
 * The Anthropic Messages provider, in pieces the chat pipeline plugs in (docs/DECISIONS.md,
 * "Anthropic wire format"): request translation, answer translation, the stream translator and
 * the request headers. None of them does I/O; the adapter that sends the bytes comes with the
 * pipeline.
 */
export { toAnthropicRequest } from './request.ts';
export { fromAnthropicResponse, type ChatCompletion } from './response.ts';
export { AnthropicStreamTranslator, type ChatCompletionChunk, type StreamOutput } from './stream.ts';
export { anthropicHeaders, DEFAULT_ANTHROPIC_VERSION } from './headers.ts';
export { translateUsage, type TranslatedUsage } from './usage.ts';
export type { Refusal, Translated } from '../translated.ts';
