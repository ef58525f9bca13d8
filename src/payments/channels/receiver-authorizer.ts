import type { Config } from '../../config/schema.ts';
import type { Facilitator } from '../facilitator/facilitator.ts';

type Known = Map<string, string>;
const fromFacilitator = new WeakMap<Facilitator, Promise<Known>>();

/**
 * Who authorizes claims and refunds of this gateway's channels, per network: the configured
 * payPerRequest.batchSettlement.receiverAuthorizer, else the facilitator's own (the local
 * facilitator's signing key, or what a remote facilitator's /supported `batch-settlement` kind names,
 * read once). Undefined for a network where none is known: no channel is offered there.
 */
export async function receiverAuthorizers(config: Pick<Config, 'payPerRequest'>, facilitator: Facilitator): Promise<(network: string) => string | undefined> {
  const configured = config.payPerRequest.batchSettlement.receiverAuthorizer;
  if (configured) return () => configured;
  // The local facilitator names the key it signs claims and refunds with.
  const local = (facilitator as Facilitator & { receiverAuthorizer?: string }).receiverAuthorizer;
  if (local) return () => local;
  let known = fromFacilitator.get(facilitator);
  if (!known) {
    known = readSupported(facilitator);
    fromFacilitator.set(facilitator, known);
  }
  const map = await known;
  return (network) => map.get(network);
}

async function readSupported(facilitator: Facilitator): Promise<Known> {
  const known: Known = new Map();
  try {
    const { kinds } = await facilitator.supported();
    for (const k of kinds as Array<{ scheme: string; network: string; extra?: { receiverAuthorizer?: unknown } }>) {
      if (k.scheme === 'batch-settlement' && typeof k.extra?.receiverAuthorizer === 'string') known.set(k.network, k.extra.receiverAuthorizer);
    }
  } catch {
    // Unreachable now: asked again on the next request rather than never offering channels.
    fromFacilitator.delete(facilitator);
  }
  return known;
}
