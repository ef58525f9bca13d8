import type { PublicClient } from 'viem';

/**
 * Read-only access to the configured chains (one RPC URL per chain id). Used for contract-wallet
 * signatures (ERC-1271 / ERC-6492) and, later, payment receipts. Timeouts are short: a caller is
 * waiting, and an unreachable RPC must become a 503 quickly rather than hang a request.
 */
export interface ChainReaders {
  has(chainId: number): boolean;
  client(chainId: number): PublicClient;
}

export async function createChainReaders(chains: Record<string, { rpcUrl: string }>, timeoutMs = 5_000): Promise<ChainReaders> {
  const clients = new Map<number, PublicClient>();
  // viem's client code is loaded only when a chain is configured: a gateway without one starts
  // faster and holds less memory.
  const { createPublicClient, http } = Object.keys(chains).length ? await import('viem') : ({} as typeof import('viem'));
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
