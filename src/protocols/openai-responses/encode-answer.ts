import { randomBytes } from 'node:crypto';
import { withCharge, type Charge } from '../charge.ts';
import type { InternalCompletion, InternalUsage } from '../internal.ts';

/**
 * The pieces of an OpenAI Responses answer built from the internal chat-completions form, shared
 * by the JSON answer and the stream (whose final event carries the same Response object).
 */

export const newId = (prefix: 'resp' | 'msg' | 'fc') => `${prefix}_${randomBytes(16).toString('hex')}`;

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export type ResponseStatus = 'completed' | 'incomplete' | 'failed';

/** A chat finish_reason as the Response's status: a cut answer is "incomplete" with the reason. */
export function statusOf(finishReason: unknown): { status: ResponseStatus; incomplete_details: { reason: string } | null } {
  if (finishReason === 'length') return { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incomplete_details: { reason: 'content_filter' } };
  return { status: 'completed', incomplete_details: null };
}

/**
 * Chat usage in the Responses names, with the charge (src/protocols/charge.ts) when there is one;
 * null when the provider reported none and nothing was charged (the bill was estimated; an
 * estimated bill's charge rides on `billed`, the usage that was billed, in OpenAI's names).
 */
export function responsesUsage(usage: InternalUsage | null | undefined, charge?: Charge, billed?: InternalUsage): Record<string, unknown> | null {
  const counts = tokenCounts(usage) ?? (charge ? tokenCounts(billed) : null);
  return counts && withCharge(counts, charge);
}

function tokenCounts(usage: InternalUsage | null | undefined): Record<string, unknown> | null {
  if (!usage || typeof usage.prompt_tokens !== 'number' || typeof usage.completion_tokens !== 'number') return null;
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}

export type ContentPart = { type: 'output_text'; text: string; annotations: []; logprobs: [] } | { type: 'refusal'; refusal: string };

export const textPart = (text: string): ContentPart => ({ type: 'output_text', text, annotations: [], logprobs: [] });

export function messageItem(id: string, content: ContentPart[], status: 'in_progress' | 'completed' | 'incomplete') {
  return { id, type: 'message', status, role: 'assistant', content };
}

export function functionCallItem(id: string, callId: string, name: string, args: string, status: 'in_progress' | 'completed' | 'incomplete') {
  return { id, type: 'function_call', status, call_id: callId, name, arguments: args };
}

/**
 * The Response object. `store` is false here: a stored response is marked true by the keeper that
 * stored it (src/stored-responses/keeper.ts), once it was billed and kept, so the field says what
 * happened, not what was asked. The request's own settings (instructions, tools, temperature…) are
 * not echoed back.
 */
export function responseObject(r: {
  id: string;
  createdAt: number;
  model: string;
  status: ResponseStatus | 'in_progress';
  incompleteDetails?: { reason: string } | null;
  error?: { code: string; message: string } | null;
  output: unknown[];
  usage: Record<string, unknown> | null;
}) {
  return {
    id: r.id,
    object: 'response',
    created_at: r.createdAt,
    status: r.status,
    error: r.error ?? null,
    incomplete_details: r.incompleteDetails ?? null,
    model: r.model,
    output: r.output,
    store: false,
    usage: r.usage,
  };
}

/**
 * A whole chat.completion (the first choice: Responses has no `n`) as a Response object; `charge`
 * and `billed` as for responsesUsage.
 */
export function responseFromCompletion(parsed: InternalCompletion, charge?: Charge, billed?: InternalUsage): Record<string, unknown> {
  const choice = parsed?.choices?.[0] ?? {};
  const message = choice.message ?? {};
  const output: unknown[] = [];
  const content: ContentPart[] = [];
  if (typeof message.content === 'string' && message.content !== '') content.push(textPart(message.content));
  if (typeof message.refusal === 'string' && message.refusal !== '') content.push({ type: 'refusal', refusal: message.refusal });
  const { status, incomplete_details } = statusOf(choice.finish_reason);
  const itemStatus = status === 'incomplete' ? 'incomplete' : 'completed';
  if (content.length) output.push(messageItem(newId('msg'), content, itemStatus));
  for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    output.push(
      functionCallItem(newId('fc'), String(call?.id ?? ''), String(call?.function?.name ?? ''), String(call?.function?.arguments ?? ''), 'completed'),
    );
  }
  return responseObject({
    id: newId('resp'),
    createdAt: typeof parsed?.created === 'number' ? parsed.created : nowSeconds(),
    model: String(parsed?.model ?? ''),
    status,
    incompleteDetails: incomplete_details,
    output,
    usage: responsesUsage(parsed?.usage, charge, billed),
  });
}
