import type { InboundCodec } from './codec.ts';
import { anthropicMessagesCodec } from './anthropic-messages.ts';
import { openAIChatCodec } from './openai-chat.ts';
import { responsesCodec } from './responses.ts';

/**
 * Every protocol the chat path is served in, one route each (src/http/routes/chat.ts registers
 * them). Adding a protocol: write its codec (codec.ts) in this folder, add it here.
 */
export const INBOUND_CODECS: readonly InboundCodec[] = [
  openAIChatCodec,
  responsesCodec,
  anthropicMessagesCodec,
];

export type { InboundCodec, StreamEncoder } from './codec.ts';
