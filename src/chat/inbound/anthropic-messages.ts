import type { InboundCodec } from './codec.ts';
import { planChat, resolveModel } from '../plan.ts';
import { readUsage, type Usage } from '../usage.ts';
import { decodeMessagesRequest } from './anthropic/decode-request.ts';
import { encodeMessage } from './anthropic/encode-answer.ts';
import { anthropicErrorBody } from './anthropic/error-body.ts';
import { planNative } from './anthropic/native-plan.ts';
import { checkMessagesRequest, refusePricedExtras } from './anthropic/request-checks.ts';
import { nativeStreamEncoder, translatingStreamEncoder } from './anthropic/stream-encoder.ts';

/**
 * POST /v1/messages: Anthropic's Messages API, for Claude Code and the Anthropic SDKs. The key comes
 * as `x-api-key` or `Authorization: Bearer`; errors are Anthropic's `{"type":"error","error":{…}}`.
 * A model served by an Anthropic provider gets the request natively (planNative: no translation,
 * answers and events relayed as sent); any other model gets it translated into chat completions
 * and the answer translated back.
 */
/** The usage inside an internal answer, for a caller that passed none (zeros when it has none either). */
const reportedUsage = (parsed: any): Usage => readUsage(parsed?.usage) ?? { promptTokens: 0, completionTokens: 0, reasoningTokens: 0, cachedTokens: 0, estimated: true };

export const anthropicMessagesCodec: InboundCodec = {
  path: '/v1/messages',
  openaiCompatible: false,
  apiKeyHeader: 'x-api-key',
  errorBody: anthropicErrorBody,
  decodeRequest: (body) => decodeMessagesRequest(body),
  plan(body, catalog, config) {
    const b = checkMessagesRequest(body);
    refusePricedExtras(b);
    const model = resolveModel(catalog, b.model);
    return model.upstream === 'anthropic' ? planNative(b, model, config) : planChat(decodeMessagesRequest(b, model.extraFields), catalog, config);
  },
  encodeAnswer: (internalJson, parsed, plan, usage) => (plan?.native ? internalJson : JSON.stringify(encodeMessage(parsed, usage ?? reportedUsage(parsed)))),
  streamEncoder: (plan) => (plan.native ? nativeStreamEncoder() : translatingStreamEncoder(plan)),
};
