import type { Config } from '../../config/schema.ts';
import { findModel, type Catalog, type CatalogModel } from '../../providers/catalog.ts';
import { reservationFor } from '../../providers/pricing.ts';
import type { UpstreamTranslator } from '../../protocols/upstream.ts';
import { badRequest } from '../../refusal.ts';
import { checkForwardedFields } from '../../protocols/openai-chat/request-fields.ts';
import { measureParts, type NonTextParts } from '../prompt-bound.ts';
import { encodeForDeployments, largestBound, type DeploymentPlan, type SkippedDeployment } from './deployment.ts';

/** Everything decided about a chat request before any money moves or any byte goes upstream. */
export interface ChatPlan {
  model: CatalogModel;
  stream: boolean;
  /** The client asked for the usage chunk (`stream_options.include_usage`). */
  clientWantsUsage: boolean;
  maxTokens: number;
  n: number;
  /** Upper bound of prompt tokens, computed without a network call. */
  promptUpperBound: number;
  /** The declared non-text parts (images, audio, files) and the tokens reserved for them. */
  parts: NonTextParts;
  reservationUsdc: number;
  /** The request in the internal form (OpenAI chat completions) after the plan's rewrites; the estimate reads it. */
  upstreamBody: Record<string, unknown>;
  /** `upstreamBody` encoded in the provider's wire format and serialised (UTF-8): what is sent, byte for byte. */
  upstreamBytes: Buffer;
  /** Decodes the provider's answer and events (the provider type's upstream translator, or a native pass-through's). */
  upstream: UpstreamTranslator;
  /**
   * The request for each deployment that can take it, in the model's order (the first is what
   * `upstreamBytes` and `upstream` describe); `promptUpperBound` is the largest of their bounds.
   */
  routes: DeploymentPlan[];
  /** The deployments that cannot take this request, logged when it runs. */
  skipped: SkippedDeployment[];
  /**
   * The client speaks the provider's own protocol and `upstreamBytes` is its request, allowlisted
   * but untranslated: answers and events go back as the provider sent them.
   */
  native: boolean;
  /** Headers sent upstream beside the provider's own (a native request's price-neutral betas, merged with the operator's). */
  upstreamHeaders?: Record<string, string>;
  /** Headers for the client saying what the plan changed (a lowered max_tokens, betas not forwarded). */
  responseHeaders?: Record<string, string>;
}

const MAX_N = 16;
/**
 * Thinking budgets for OpenAI's reasoning efforts. OpenAI's set is none (no reasoning; gpt-5.1's
 * default), minimal, low, medium, high and xhigh (the models after gpt-5.1-codex-max; Codex CLI's
 * model_reasoning_effort takes it): an effort-family model gets each as sent, a thinking-family one no
 * thinking for none and the largest budget here for xhigh.
 */
const EFFORT_BUDGETS: Record<string, number> = { minimal: 512, low: 1024, medium: 4096, high: 16384, xhigh: 16384 };
const EFFORTS: readonly string[] = ['none', ...Object.keys(EFFORT_BUDGETS)];

/**
 * Validates the body and resolves the model. Only allowlisted fields are forwarded (see
 * src/protocols/openai-chat/request-fields.ts), and the reservation bounds the body exactly as it will be sent.
 */
export function planChat(body: unknown, catalog: Catalog, config: Pick<Config, 'chat'>, maxTokensCap = Infinity): ChatPlan {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('request body must be a JSON object');
  const b = body as Record<string, unknown>;
  const missing = ['model', 'messages'].filter((k) => b[k] === undefined || b[k] === null);
  if (missing.length) throw badRequest(`${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required`, { param: missing[0]! });
  if (typeof b.model !== 'string' || !b.model) throw badRequest('model must be a string such as "openai/gpt-4o-mini"', { param: 'model' });
  if (!Array.isArray(b.messages) || b.messages.length === 0)
    throw badRequest('messages must be a non-empty array of {role, content} objects', { param: 'messages' });
  b.messages.forEach((m, i) => {
    if (typeof m !== 'object' || m === null || typeof (m as { role?: unknown }).role !== 'string') {
      throw badRequest(`messages[${i}] must be an object with a string role`, { param: `messages[${i}]` });
    }
  });
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw badRequest('stream must be true or false', { param: 'stream' });
  if (b.stream_options !== undefined && b.stream_options !== null && (typeof b.stream_options !== 'object' || Array.isArray(b.stream_options))) {
    throw badRequest('stream_options must be an object such as {"include_usage": true}', { param: 'stream_options' });
  }

  const model = resolveModel(catalog, b.model);
  checkForwardedFields(b, model.extraFields);
  const parts = measureParts(b.messages, model);
  // maxTokensCap: the balance fit's lower limit (src/http/inference/balance-fit.ts).
  const maxTokens = Math.min(resolveMaxTokens(b, model, config.chat.defaultMaxTokens), maxTokensCap);
  const n = b.n === undefined || b.n === null ? 1 : b.n;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_N) throw badRequest(`n must be a whole number from 1 to ${MAX_N}`, { param: 'n' });

  const upstreamBody: Record<string, unknown> = { ...b, model: model.upstreamName };
  delete upstreamBody.max_tokens;
  delete upstreamBody.max_completion_tokens;
  // The limit always goes upstream explicitly, so the reservation is a true bound. Effort-family
  // (o-series) models accept only max_completion_tokens.
  const useCompletionField = b.max_completion_tokens !== undefined || model.reasoningFamily === 'effort';
  upstreamBody[useCompletionField ? 'max_completion_tokens' : 'max_tokens'] = maxTokens;
  applyReasoning(b, upstreamBody, model, config.chat.reasoning);

  const stream = b.stream === true;
  const options = (b.stream_options ?? {}) as Record<string, unknown>;
  const clientWantsUsage = stream && options.include_usage === true;
  if (stream) upstreamBody.stream_options = { ...options, include_usage: true };

  // Encoded for each deployment by its provider type's upstream translator (the identity for
  // OpenAI-compatible providers); what none can honour is a 400 naming the client's field, before
  // anything is reserved. Bounded on what goes upstream, after every rewrite above.
  const { routes, skipped } = encodeForDeployments(upstreamBody, model, parts);
  const promptUpperBound = largestBound(routes);
  return {
    model,
    stream,
    clientWantsUsage,
    maxTokens,
    n,
    promptUpperBound,
    parts,
    reservationUsdc: reservationFor(model, promptUpperBound, maxTokens, n),
    upstreamBody,
    upstreamBytes: routes[0]!.upstreamBytes,
    upstream: routes[0]!.upstream,
    routes,
    skipped,
    native: false,
  };
}

/** The endpoint that serves each model type, named in the 400 for a model sent to the other one. */
const ENDPOINT_OF: Record<CatalogModel['type'], string> = {
  chat: 'POST /v1/chat/completions (or /v1/responses, /v1/messages)',
  embedding: 'POST /v1/embeddings',
};

/**
 * The model a request names, which must be of the type the endpoint serves (`serving`): a chat
 * model on /v1/embeddings or an embedding model on a chat endpoint is a 400 naming the right one.
 */
export function resolveModel(catalog: Catalog, requested: string, serving: CatalogModel['type'] = 'chat'): CatalogModel {
  const lookup = findModel(catalog, requested);
  if ('found' in lookup) {
    const { type, id } = lookup.found;
    if (type !== serving)
      throw badRequest(`model ${id} is ${type === 'embedding' ? 'an embedding' : 'a chat'} model; send it to ${ENDPOINT_OF[type]}`, { param: 'model' });
    return lookup.found;
  }
  if ('ambiguous' in lookup) {
    throw badRequest(`model "${requested}" is offered by several providers; use one of ${lookup.ambiguous.join(', ')}`, {
      param: 'model',
      candidates: lookup.ambiguous,
    });
  }
  throw badRequest(`unknown model "${requested.slice(0, 200)}"; GET /v1/models lists the available ones`, { param: 'model' });
}

/** Which of the two names the client used for the output limit, for `param`. */
const maxTokensField = (b: Record<string, unknown>) => (b.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens');

export function resolveMaxTokens(b: Record<string, unknown>, model: CatalogModel, fallback: number): number {
  const given = b.max_completion_tokens ?? b.max_tokens;
  if (b.max_completion_tokens !== undefined && b.max_tokens !== undefined && b.max_completion_tokens !== b.max_tokens) {
    throw badRequest('max_tokens and max_completion_tokens disagree; send one of them', { param: 'max_tokens' });
  }
  if (given === undefined || given === null) return Math.min(fallback, model.maxOutputTokens);
  if (typeof given !== 'number' || !Number.isInteger(given) || given < 1)
    throw badRequest('max_tokens must be a positive whole number', { param: maxTokensField(b) });
  if (given > model.maxOutputTokens)
    throw badRequest(`max_tokens ${given} is above ${model.id}'s limit of ${model.maxOutputTokens}`, { param: maxTokensField(b) });
  return given;
}

/**
 * `reject`: either field is a 400. `forward`: thinking-family models get `thinking`, effort-family
 * models get `reasoning_effort` (each translated from the other when only that one was sent), and
 * other models get both as they came.
 */
function applyReasoning(b: Record<string, unknown>, out: Record<string, unknown>, model: CatalogModel, mode: 'reject' | 'forward'): void {
  const hasThinking = b.thinking !== undefined;
  const hasEffort = b.reasoning_effort !== undefined;
  if (!hasThinking && !hasEffort) return;
  if (mode === 'reject')
    throw badRequest('thinking and reasoning_effort are not accepted by this gateway; remove them from the request', {
      param: hasThinking ? 'thinking' : 'reasoning_effort',
    });
  // A model of no reasoning family gets both fields as they came (the spec's forwarding variant): its
  // provider takes, ignores or refuses them, and neither changes the reservation. Only where the value
  // is interpreted (a family, an Anthropic upstream) must it be one of OpenAI's set.
  if (model.reasoningFamily === 'none' && model.upstream !== 'anthropic') return;
  if (hasEffort && (typeof b.reasoning_effort !== 'string' || !EFFORTS.includes(b.reasoning_effort))) {
    throw badRequest(`reasoning_effort must be one of ${EFFORTS.join(', ')}`, { param: 'reasoning_effort' });
  }
  // Anthropic's upstream translator maps reasoning_effort to a thinking budget itself, with Anthropic's minimum.
  if (model.upstream === 'anthropic') return;
  if (model.reasoningFamily === 'thinking') {
    delete out.reasoning_effort;
    if (!hasThinking && b.reasoning_effort !== 'none') out.thinking = { type: 'enabled', budget_tokens: EFFORT_BUDGETS[b.reasoning_effort as string] };
  } else if (model.reasoningFamily === 'effort') {
    delete out.thinking;
    if (!hasEffort) {
      const t = b.thinking as { type?: string; budget_tokens?: number } | null;
      if (t && t.type !== 'disabled') {
        const budget = typeof t.budget_tokens === 'number' ? t.budget_tokens : EFFORT_BUDGETS.medium!;
        out.reasoning_effort = budget <= 1024 ? 'low' : budget <= 4096 ? 'medium' : 'high';
      }
    }
  }
}
