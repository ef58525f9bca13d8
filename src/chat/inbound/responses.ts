import type { InboundCodec } from './codec.ts';
import { decodeResponsesRequest, responsesParam } from './responses-request.ts';
import { responseFromCompletion } from './responses-output.ts';
import { ResponsesStreamEncoder } from './responses-stream.ts';

/**
 * POST /v1/responses: OpenAI's Responses API, stateless. Requests are translated onto chat
 * completions (responses-request.ts), so every provider type serves them and the plan, reservation
 * and bill are the chat path's own; answers and events are written back as Response objects and
 * Responses events. Errors follow `errors.format`, as on every OpenAI-compatible route.
 */
export const responsesCodec: InboundCodec = {
  path: '/v1/responses',
  openaiCompatible: true,
  clientParam: responsesParam,
  decodeRequest: decodeResponsesRequest,
  encodeAnswer: (_internalJson, parsed) => JSON.stringify(responseFromCompletion(parsed)),
  streamEncoder: (plan) => new ResponsesStreamEncoder(plan),
};
