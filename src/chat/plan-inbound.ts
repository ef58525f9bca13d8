import type { Config } from '../config/schema.ts';
import type { Catalog } from '../providers/catalog.ts';
import { planNative } from './native-plan.ts';
import { planChat, resolveModel, type ChatPlan } from './plan.ts';
import type { InboundTranslator } from '../protocols/inbound.ts';

/**
 * The plan for a request of `inbound`'s protocol: sent untranslated when the model's provider speaks
 * the protocol itself (inbound.native; Anthropic Messages is the only one), else decoded into the
 * internal form and planned as chat.
 */
export function planInbound(inbound: InboundTranslator, body: unknown, catalog: Catalog, config: Pick<Config, 'chat'>): ChatPlan {
  if (!inbound.native) return planChat(inbound.decodeRequest(body), catalog, config);
  const b = inbound.native.checkRequest(body);
  const model = resolveModel(catalog, b.model);
  return model.upstream === inbound.native.upstream ? planNative(b, model, config) : planChat(inbound.decodeRequest(b, model.extraFields), catalog, config);
}
