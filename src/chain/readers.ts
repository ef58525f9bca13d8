import { createPublicClient, http, type PublicClient } from 'viem';

/**
 * Read-only access to the configured chains (one RPC URL per chain id). Used for contract-wallet
 * signatures (ERC-1271 / ERC-6492) and, later, payment receipts. Timeouts are short: a caller is
 * waiting, and an unreachable RPC must become a 503 quickly rather than hang a request.
 */
export interface ChainReaders {
  has(chainId: number): boolean;
  client(chainId: number): PublicClient;
}

export function createChainReaders(chains: Record<string, { rpcUrl: string }>, timeoutMs = 5_000): ChainReaders {
  const clients = new Map<number, PublicClient>();
  for (const [id, c] of Object.entries(chains)) {
    clients.set(Number(id), createPublicClient({ transport: http(c.rpcUrl, { timeout: timeoutMs, retryCount: 0 }) }));
  }
  return {
    has: (chainId) => clients.has(chainId),
    client(chainId) {
      const c = clients.get(chainId);
      if (!c) throw new Error(`no RPC configured for chain ${chainId}`);
      return c;
    },
  };
}
