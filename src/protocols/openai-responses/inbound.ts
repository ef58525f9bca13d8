import type { InboundTranslator } from '../inbound.ts';
import { decodeResponsesRequest, responsesParam } from './decode-request.ts';
import { droppedHeaders } from './dropped.ts';
import { openAIUsageOf, shownUsage } from '../openai-chat/encode-usage.ts';
import { responseFromCompletion } from './encode-answer.ts';
import { ResponsesStreamEncoder } from './encode-stream.ts';

/**
 * POST /v1/responses: OpenAI's Responses API. References to stored responses are resolved before
 * decoding, and answers stored after billing, by the route (src/stored-responses/). Requests are translated onto chat
 * completions (decode-request.ts), so every provider type serves them and the plan, reservation
 * and bill are the chat path's own; answers and events are written back as Response objects and
 * Responses events. Errors follow `errors.format`, as on every OpenAI-compatible route.
 */
export const responsesInbound: InboundTranslator = {
  path: '/v1/responses',
  openaiCompatible: true,
  clientParam: responsesParam,
  decodeRequest: decodeResponsesRequest,
  decodedHeaders: droppedHeaders,
  encodeAnswer: (_internalJson, parsed, _plan, usage, charge) =>
    JSON.stringify(responseFromCompletion({ ...parsed, usage: shownUsage(parsed?.usage, usage) }, charge, usage && openAIUsageOf(usage))),
  streamEncoder: (plan) => new ResponsesStreamEncoder(plan),
};
