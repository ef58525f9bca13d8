import type { InboundTranslator } from '../inbound.ts';
import type { InternalCompletion, Usage } from '../internal.ts';
import { readUsage } from '../openai-chat/decode-usage.ts';
import { decodeMessagesRequest } from './decode-request.ts';
import { encodeMessage, nativeMessageWithCharge } from './encode-answer.ts';
import { anthropicErrorBody } from './error-body.ts';
import { checkMessagesRequest, refusePricedFields } from './request-checks.ts';
import { nativeStreamEncoder, translatingStreamEncoder } from './encode-stream.ts';

/**
 * POST /v1/messages: Anthropic's Messages API, for Claude Code and the Anthropic SDKs. The key comes
 * as `x-api-key` or `Authorization: Bearer`; errors are Anthropic's `{"type":"error","error":{…}}`.
 * A model served by an Anthropic provider gets the request natively (`native`, planned by
 * src/metered/plan/native.ts: no translation, answers and events relayed as sent); any other model
 * gets it translated into chat completions and the answer translated back.
 */
/** The usage inside an internal answer, for a caller that passed none (zeros when it has none either). */
const reportedUsage = (parsed: InternalCompletion): Usage =>
  readUsage(parsed?.usage) ?? { input: { total: 0, cacheRead: 0, cacheWrite: 0 }, output: { total: 0, reasoning: 0 }, estimated: true };

export const anthropicMessagesInbound: InboundTranslator = {
  path: '/v1/messages',
  openaiCompatible: false,
  apiKeyHeader: 'x-api-key',
  errorBody: anthropicErrorBody,
  decodeRequest: (body, extraFields, target) => decodeMessagesRequest(body, extraFields, target),
  native: {
    upstream: 'anthropic',
    checkRequest(body) {
      const b = checkMessagesRequest(body);
      refusePricedFields(b);
      return b as ReturnType<typeof checkMessagesRequest> & { model: string };
    },
  },
  encodeAnswer: (internalJson, parsed, plan, usage, charge) =>
    plan?.native ? nativeMessageWithCharge(internalJson, charge) : JSON.stringify(encodeMessage(parsed, usage ?? reportedUsage(parsed), charge)),
  streamEncoder: (plan) => (plan.native ? nativeStreamEncoder() : translatingStreamEncoder(plan)),
};
