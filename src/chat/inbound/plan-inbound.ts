import type { Config } from '../../config/load.ts';
import type { Catalog } from '../../providers/catalog.ts';
import { planChat, type ChatPlan } from '../plan.ts';
import type { InboundCodec } from './codec.ts';

/** The plan for a request of `codec`'s protocol: its own planning when it has one, else decoded and planned as chat. */
export function planInbound(codec: InboundCodec, body: unknown, catalog: Catalog, config: Pick<Config, 'chat'>): ChatPlan {
  return codec.plan ? codec.plan(body, catalog, config) : planChat(codec.decodeRequest(body), catalog, config);
}
