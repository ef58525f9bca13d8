import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { actionStatements } from '../../siwe/actions.ts';

/**
 * What a SIWE proof must say to be accepted here. Clients (the wallet CLI, agents) read it instead of
 * guessing the domain from the URL they were given, which differs behind a proxy or in a container.
 */
export function siweInfoRoutes(app: FastifyInstance, services: Services): void {
  const { siwe } = services.config;
  const info = {
    domain: siwe.domains[0],
    uri: siwe.uris[0],
    domains: siwe.domains,
    uris: siwe.uris,
    chain_ids: siwe.chainIds,
    // A contract wallet (ERC-1271 / ERC-6492) must sign with this Chain ID; keys may use any of chain_ids.
    contract_wallet_chain_id: siwe.contractWalletChainId,
    version: '1',
    max_age_seconds: siwe.windowSeconds,
    // The statement a proof must carry, by action: a proof counts only for its own action.
    statements: actionStatements(services.config.dashboard.sessionMinutes),
  };
  app.get('/v1/auth/siwe', async () => info);
}
