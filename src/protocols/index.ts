import type { InboundTranslator } from './inbound.ts';
import { anthropicMessagesInbound } from './anthropic-messages/inbound.ts';
import { openAIChatInbound } from './openai-chat/inbound.ts';
import { responsesInbound } from './openai-responses/inbound.ts';

/**
 * # src/protocols/: one folder per protocol, pure translation
 *
 * Each protocol the gateway speaks has one folder holding both directions of its translation:
 * `openai-chat/` (OpenAI chat completions), `openai-responses/` (OpenAI Responses, inbound only)
 * and `anthropic-messages/` (Anthropic Messages, both inbound and upstream). The translators do no
 * I/O and import nothing from chat/, providers/ or config/: the chat pipeline (src/metered/) calls
 * them, and providers/ keeps the transport (adapters, pools, headers), the registry, the catalog
 * and the pricing.
 *
 * Vocabulary, used in file and type names alike:
 * - **internal form** (internal.ts): what both sides translate to and from; it is OpenAI chat
 *   completions, with the gateway's own `Usage`.
 * - **inbound** (inbound.ts, `InboundTranslator`): the client-facing side. It *decodes* the
 *   client's request into the internal form (`decode-request.ts`) and *encodes* the internal
 *   answer and stream back (`encode-answer.ts`, `encode-stream.ts`).
 * - **upstream** (upstream.ts, `UpstreamTranslator`): the provider-facing side. It *encodes* the
 *   internal request for the provider (`encode-request.ts`) and *decodes* the provider's answer,
 *   stream and usage into the internal form (`decode-answer.ts`, `decode-stream.ts`, `decode-usage.ts`).
 * So "decode" always means "into the internal form" and "encode" "out of it"; the file's folder
 * and the side (inbound or upstream) say whose bytes they are.
 *
 * Adding an inbound protocol: a folder with its `inbound.ts` (an InboundTranslator) and one line
 * below; src/http/routes/chat.ts serves every entry on its own route. Adding an upstream (a
 * provider type): an `upstream.ts` (an UpstreamTranslator) and a line in src/providers/registry.ts.
 */
export const INBOUND_TRANSLATORS: readonly InboundTranslator[] = [openAIChatInbound, responsesInbound, anthropicMessagesInbound];

export type { InboundTranslator, StreamEncoder } from './inbound.ts';
