import type { InboundTranslator } from '../inbound.ts';

const DONE = 'data: [DONE]\n\n';

/**
 * POST /v1/chat/completions: OpenAI's protocol is the internal form, so requests, answers and
 * events pass through as they are. The usage chunk reaches the client only if it asked for it
 * (`stream_options.include_usage`; the gateway always asks the provider, to bill).
 */
export const openAIChatInbound: InboundTranslator = {
  path: '/v1/chat/completions',
  openaiCompatible: true,
  decodeRequest: (body) => body,
  encodeAnswer: (internalJson) => internalJson,
  streamEncoder: (plan) => ({
    chunk: (data, usageOnly) => (usageOnly && !plan.clientWantsUsage ? '' : `data: ${data}\n\n`),
    // The event clients already parse for a provider failure (docs/api.md "Streaming").
    failure: (message) => `data: ${JSON.stringify({ error: { message, type: 'upstream_error' } })}\n\n${DONE}`,
    end: () => DONE,
  }),
};
