import type { Config } from '../../config/schema.ts';
import type { Catalog } from '../../providers/catalog.ts';
import { planNative } from './native.ts';
import { planChat, resolveModel, type ChatPlan } from './plan.ts';
import type { InboundTranslator } from '../../protocols/inbound.ts';

/** What planning reads of a request beyond its body. */
export interface PlanOptions {
  /** The client's `anthropic-beta` header(s), for a native Messages request. */
  betas?: string | string[];
  /** Plan with max_tokens at most this (the balance fit lowers it so; see src/http/inference/balance-fit.ts). */
  maxTokensCap?: number;
}

/**
 * The plan for a request of `inbound`'s protocol: sent untranslated when the model's provider speaks
 * the protocol itself (inbound.native; Anthropic Messages is the only one), else decoded into the
 * internal form and planned as chat. A translated Messages request has its max_tokens lowered to the
 * model's limit (Anthropic clients choose it for Claude's window), said in `x-tollgate-max-tokens`.
 */
export function planInbound(inbound: InboundTranslator, body: unknown, catalog: Catalog, config: Pick<Config, 'chat'>, opts: PlanOptions = {}): ChatPlan {
  if (!inbound.native) {
    const plan = planChat(inbound.decodeRequest(body), catalog, config, opts.maxTokensCap);
    const headers = inbound.decodedHeaders?.(body) ?? {};
    return Object.keys(headers).length ? { ...plan, responseHeaders: { ...plan.responseHeaders, ...headers } } : plan;
  }
  const b = inbound.native.checkRequest(body);
  const model = resolveModel(catalog, b.model);
  if (model.upstream === inbound.native.upstream) return planNative(b, model, config, opts);
  const target = { reasoningFamily: model.reasoningFamily, maxOutputTokens: Math.min(model.maxOutputTokens, opts.maxTokensCap ?? Infinity) };
  const plan = planChat(inbound.decodeRequest(b, model.extraFields, target), catalog, config);
  const requested = (b as { max_tokens?: unknown }).max_tokens;
  return typeof requested === 'number' && plan.maxTokens < requested ? { ...plan, responseHeaders: { 'x-tollgate-max-tokens': String(plan.maxTokens) } } : plan;
}
