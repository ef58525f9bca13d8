import type { OfferConfig } from '../config/schema.ts';
import type { Offer } from './offers.ts';

/**
 * x402 v1 in the 402 body (topup.x402v1Body), for the stock v1 clients (`x402-fetch` 1.x,
 * `x402-axios` 0.7). They read only the body, parse every entry of `accepts` with their v1 schema
 * (one unreadable entry fails the whole offer before anything is signed), name networks by a fixed
 * list of names, sign EIP-3009 only, and pick the first entry on their wallet's network (the
 * network's canonical USDC first). So the v1 body lists, per network that has a v1 name, the first
 * EIP-3009 offer on it, and nothing else; a v1 payment on that network is matched to exactly that
 * offer (payments/match.ts), which is what keeps the two in step.
 */

/**
 * Chain id → x402 v1 network name: the EVM networks the stock v1 clients accept (the `NetworkSchema`
 * of the `x402` package 0.7.3 and 1.2.0, the versions x402-axios 0.7.2 and x402-fetch 1.2.0 use).
 * Names outside this list (e.g. `ethereum`, `celo` in @x402/evm's wider table) would make those
 * clients refuse the whole body, so a chain without a name here is left out of the v1 body.
 */
export const V1_NETWORK_NAMES: Readonly<Record<number, string>> = Object.freeze({
  8453: 'base',
  84532: 'base-sepolia',
  43114: 'avalanche',
  43113: 'avalanche-fuji',
  137: 'polygon',
  80002: 'polygon-amoy',
  1329: 'sei',
  1328: 'sei-testnet',
  4689: 'iotex',
  3338: 'peaq',
  2741: 'abstract',
  11124: 'abstract-testnet',
  1514: 'story',
  41923: 'educhain',
  324705682: 'skale-base-sepolia',
});

const CHAIN_ID_OF_NAME: ReadonlyMap<string, number> = new Map(Object.entries(V1_NETWORK_NAMES).map(([id, name]) => [name, Number(id)]));

/** The v1 name of a CAIP-2 network (`eip155:84532` → `base-sepolia`), or undefined when it has none. */
export function v1NetworkName(network: string): string | undefined {
  const m = /^eip155:(\d+)$/.exec(network);
  return m ? V1_NETWORK_NAMES[Number(m[1])] : undefined;
}

/**
 * The CAIP-2 network a v1 payment names: a v1 name of the table, or a CAIP-2 id sent as is (some
 * hand-rolled v1 payloads do); undefined for anything else, which no offer can match.
 */
export function caipOfV1Network(network: string): string | undefined {
  if (/^eip155:\d+$/.test(network)) return network;
  const chainId = CHAIN_ID_OF_NAME.get(network);
  return chainId === undefined ? undefined : `eip155:${chainId}`;
}

/** Why an offer is not in the v1 body, or null when it is. `configs` in the operator's order. */
export function v1Exclusion(config: OfferConfig, configs: readonly OfferConfig[]): string | null {
  if (config.transferMethod !== 'eip3009') return `${config.transferMethod}: the stock v1 clients sign EIP-3009 only`;
  if (!v1NetworkName(config.network)) return `${config.network} has no x402 v1 network name`;
  const first = configs.find((c) => c.network === config.network && c.transferMethod === 'eip3009');
  if (first !== config)
    return `not the first EIP-3009 offer on ${config.network} (${first!.name} ${first!.asset} is): a v1 payment names no asset, so one EIP-3009 offer per network`;
  return null;
}

/** The offers a v1 client is shown and may pay: the first EIP-3009 offer of each network with a v1 name. */
export function v1Offers(offers: readonly Offer[]): Offer[] {
  const configs = offers.map((o) => o.config);
  return offers.filter((o) => v1Exclusion(o.config, configs) === null);
}

/** The offers left out of the v1 body, with the reason, for the start-up warning. */
export function v1Exclusions(configs: readonly OfferConfig[]): { network: string; asset: string; name: string; reason: string }[] {
  return configs.flatMap((c) => {
    const reason = v1Exclusion(c, configs);
    return reason === null ? [] : [{ network: c.network, asset: c.asset, name: c.name, reason }];
  });
}

export interface V1PaymentRequired {
  x402Version: 1;
  error: string;
  accepts: Record<string, unknown>[];
}

/**
 * The 402 body in x402 v1: each entry is the server's own requirement (the same amount, payTo,
 * asset and extra as the v2 header's), with the v1 network name and the v1 fields `resource`
 * (the endpoint this payment is for), `description` and `mimeType`. `amount` stays next to
 * `maxAmountRequired`: both are the amount credited.
 */
export function paymentRequiredV1(resourceUrl: string, offers: readonly Offer[], error: string, description: string): V1PaymentRequired {
  return {
    x402Version: 1,
    error,
    accepts: v1Offers(offers).map(({ requirements: r }) => ({
      scheme: r.scheme,
      network: v1NetworkName(r.network)!,
      amount: r.amount,
      maxAmountRequired: r.maxAmountRequired,
      resource: resourceUrl,
      description,
      mimeType: 'application/json',
      payTo: r.payTo,
      maxTimeoutSeconds: r.maxTimeoutSeconds,
      asset: r.asset,
      extra: r.extra,
    })),
  };
}
