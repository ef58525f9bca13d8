import { join } from 'node:path';
import { parseConfig } from '../src/config/load.ts';
import type { Config } from '../src/config/schema.ts';
import type { Anvil } from '../src/devchain/anvil.ts';
import { USDC_DOMAIN, type DevChain, type FundedAccount } from '../src/devchain/deploy.ts';

/**
 * The config of a gateway that takes USDC (EIP-3009) on the dev chain, on SQLite in `dir`, with
 * rate limits out of the way: what the payment benchmarks share. `extra` adds sections (providers,
 * models, payPerRequest, more rate limits).
 */
export function payingGatewayConfig(p: {
  anvil: Anvil;
  chain: DevChain;
  dir: string;
  payTo: FundedAccount;
  relayer: FundedAccount;
  extra?: Record<string, unknown>;
}): Config {
  const { rateLimits, ...extra } = (p.extra ?? {}) as { rateLimits?: Record<string, unknown> };
  return parseConfig(
    {
      server: { host: '127.0.0.1', port: 0 },
      database: { url: `sqlite:${join(p.dir, 'tollgate.db')}` },
      metrics: { enabled: false },
      logging: { level: 'warn' },
      chains: { [String(p.anvil.chainId)]: { rpcUrl: p.anvil.rpcUrl } },
      topup: { payTo: p.payTo.address, offers: [{ network: p.chain.network, asset: p.chain.usdc, transferMethod: 'eip3009', ...USDC_DOMAIN, decimals: 6 }] },
      rateLimits: { public: { perMinute: 1_000_000 }, ...rateLimits },
      ...extra,
    },
    { TOLLGATE_RELAYER_KEY: p.relayer.privateKey },
  );
}
